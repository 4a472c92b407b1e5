package adkgrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinels for [errors.Is]. Every error a service returns for a failed call is an [*Error]
// that matches one of them (or none, for a status without a more specific meaning).
var (
	// ErrNotFound: the session (or memory, or job) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a session with this id exists, or an event with this id and another
	// payload is stored.
	ErrAlreadyExists = errors.New("already exists")
	// ErrStaleSession: the session moved on since the caller read it (another writer appended);
	// nothing was written. Get the session again and retry the turn.
	ErrStaleSession = errors.New("stale session: it was modified since it was read")
	// ErrInvalidArgument: the server refused the request's content; its message names the
	// field. Nothing was written.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnavailable: the server could not be reached, or the connection broke (for a watch:
	// the server stopped or restarted mid-stream).
	ErrUnavailable = errors.New("server unavailable")
	// ErrResourceExhausted: a message over the size limits (an event over the server's
	// --max-event-bytes, 16 MiB by default, or a message over [MaxMessageBytes]), or a server
	// at its limit of calls at once. Nothing was written.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrUnauthenticated: the server refused the token (or its absence).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForeignSession: AppendEvent was given a session.Session not made by this client.
	ErrForeignSession = errors.New("session was not made by this client")
)

// Error is a failed call: the operation, the gRPC status and the sentinel it matches.
type Error struct {
	// Op names the call, e.g. "grpcsession: AppendEvent".
	Op string
	// Code is the gRPC status code.
	Code codes.Code
	// Message is the server's message (it names the offending field for INVALID_ARGUMENT).
	Message string
	kind    error
	cause   error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: %s", e.Op, e.Code)
	}
	return fmt.Sprintf("%s: %s: %s", e.Op, e.Code, e.Message)
}

// Is reports whether target is the sentinel this error's status maps to.
func (e *Error) Is(target error) bool { return e.kind != nil && target == e.kind }

// Unwrap returns the gRPC status error, for [status.FromError].
func (e *Error) Unwrap() error { return e.cause }

// FromRPC turns an error of a gRPC call into an [*Error]. It is the one place where status
// codes get their meaning. CANCELLED and DEADLINE_EXCEEDED match [context.Canceled] and
// [context.DeadlineExceeded].
func FromRPC(op string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	var kind error
	switch st.Code() {
	case codes.NotFound:
		kind = ErrNotFound
	case codes.AlreadyExists:
		kind = ErrAlreadyExists
	case codes.Aborted:
		kind = ErrStaleSession
	case codes.InvalidArgument, codes.OutOfRange:
		kind = ErrInvalidArgument
	case codes.ResourceExhausted:
		kind = ErrResourceExhausted
	case codes.Unavailable:
		kind = ErrUnavailable
	case codes.Unauthenticated, codes.PermissionDenied:
		kind = ErrUnauthenticated
	case codes.Canceled:
		kind = context.Canceled
	case codes.DeadlineExceeded:
		kind = context.DeadlineExceeded
	}
	return &Error{Op: op, Code: st.Code(), Message: st.Message(), kind: kind, cause: err}
}
