package adkgrpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMessageBytes is the largest message sent or received: the servers accept events of up to
// 16 MiB in requests of up to 17 MiB.
const MaxMessageBytes = 16<<20 + 1<<20

// Kind names a service for its default port and its environment variables.
type Kind string

const (
	// Session is session-svc: port 50051, ADK_GRPC_SESSION_* variables.
	Session Kind = "SESSION"
	// Memory is memory-svc: port 50052, ADK_GRPC_MEMORY_* variables.
	Memory Kind = "MEMORY"
)

func (k Kind) defaultPort() string {
	if k == Memory {
		return "50052"
	}
	return "50051"
}

// Option changes how a service connects; options win over the URI and the environment.
type Option func(*config)

type config struct {
	token        *string
	timeout      *time.Duration
	tls          *tls.Config
	retries      int
	dialOptions  []grpc.DialOption
	retryMethods []string
}

// WithToken sends "authorization: Bearer TOKEN" with every call.
func WithToken(token string) Option { return func(c *config) { c.token = &token } }

// WithTimeout is the deadline of every unary call (watches are not bounded); 0 for none.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = &d } }

// WithTLS connects with TLS using cfg, whatever the URI's scheme.
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithRetries sets how many times an idempotent call (reads, deletes, appends, which carry an
// event id the server de-duplicates) is retried on UNAVAILABLE, with exponential backoff from
// 100 ms; default 3, 0 turns retries off.
func WithRetries(n int) Option { return func(c *config) { c.retries = n } }

// WithDialOptions adds gRPC dial options (interceptors, keepalive, ...).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOptions = append(c.dialOptions, opts...) }
}

// RetryMethods names the idempotent methods of a service ("adk.session.v1.SessionService/
// GetSession", ...); the services pass theirs to [Dial], users have no need for it.
func RetryMethods(methods ...string) Option {
	return func(c *config) { c.retryMethods = append(c.retryMethods, methods...) }
}

// Dial opens a connection to the service a URI names:
//
//	grpc://host[:port]   plaintext
//	grpcs://host[:port]  TLS (system roots, or ca_file)
//
// with query parameters token_env=NAME (the bearer token is $NAME), ca_file=PATH (PEM roots,
// grpcs only) and timeout=SECONDS (per call). What the URI leaves out comes from the
// environment: ADK_GRPC_<KIND>_TOKEN or ADK_GRPC_TOKEN, ADK_GRPC_<KIND>_CA_FILE or
// ADK_GRPC_CA_FILE, ADK_GRPC_<KIND>_TIMEOUT or ADK_GRPC_TIMEOUT. An unknown parameter, an unset
// token variable, an unreadable CA file or a bad timeout is an error here, before any call.
// The connection is lazy: a server that is down fails the first call, not Dial.
func Dial(uri string, kind Kind, opts ...Option) (*grpc.ClientConn, error) {
	cfg := config{retries: 3}
	if err := cfg.fromURI(uri, kind); err != nil {
		return nil, err
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	target, err := hostPort(uri, kind)
	if err != nil {
		return nil, err
	}
	dialOpts := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(newCodec()),
			grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithDefaultServiceConfig(retryConfig(cfg.retryMethods, cfg.retries)),
	}
	if cfg.tls != nil {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(cfg.tls)))
	} else {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if cfg.token != nil && *cfg.token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer(*cfg.token)))
	}
	if cfg.timeout != nil && *cfg.timeout > 0 {
		dialOpts = append(dialOpts, grpc.WithUnaryInterceptor(deadline(*cfg.timeout)))
	}
	dialOpts = append(dialOpts, cfg.dialOptions...)
	conn, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("adkgrpc: %s: %w", uri, err)
	}
	return conn, nil
}

func (c *config) fromURI(uri string, kind Kind) error {
	u, err := url.Parse(uri)
	if err != nil {
		return fmt.Errorf("adkgrpc: %q is not a URI: %w", uri, err)
	}
	if u.Scheme != "grpc" && u.Scheme != "grpcs" {
		return fmt.Errorf("adkgrpc: expected a grpc:// or grpcs:// URI, got %q", uri)
	}
	if (u.Path != "" && u.Path != "/") || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return fmt.Errorf("adkgrpc: a %s:// URI names host, port and query parameters only, got %q", u.Scheme, uri)
	}
	setting := func(name string) string {
		if v := os.Getenv("ADK_GRPC_" + string(kind) + "_" + name); v != "" {
			return v
		}
		return os.Getenv("ADK_GRPC_" + name)
	}
	token, caFile, timeout := setting("TOKEN"), "", setting("TIMEOUT")
	if u.Scheme == "grpcs" {
		caFile = setting("CA_FILE")
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("adkgrpc: %q: bad query: %w", uri, err)
	}
	for name, values := range query {
		value := values[len(values)-1]
		switch name {
		case "token_env":
			token = os.Getenv(value)
			if token == "" {
				return fmt.Errorf("adkgrpc: %q: token_env names $%s, which is not set", uri, value)
			}
		case "ca_file":
			if u.Scheme != "grpcs" {
				return fmt.Errorf("adkgrpc: %q: ca_file needs a grpcs:// URI", uri)
			}
			caFile = value
		case "timeout":
			timeout = value
		default:
			return fmt.Errorf("adkgrpc: %q: unknown query parameter %q (known: token_env, ca_file, timeout)", uri, name)
		}
	}
	if token != "" {
		c.token = &token
	}
	if timeout != "" {
		seconds, err := strconv.ParseFloat(timeout, 64)
		if err != nil || !(seconds > 0) || seconds > 1e9 {
			return fmt.Errorf("adkgrpc: %q: timeout must be a positive number of seconds, got %q", uri, timeout)
		}
		d := time.Duration(seconds * float64(time.Second))
		c.timeout = &d
	}
	if u.Scheme == "grpcs" {
		c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("adkgrpc: %q: cannot read ca_file: %w", uri, err)
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return fmt.Errorf("adkgrpc: %q: ca_file %s holds no PEM certificate", uri, caFile)
			}
			c.tls.RootCAs = roots
		}
	}
	return nil
}

func hostPort(uri string, kind Kind) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("adkgrpc: %q is not a URI: %w", uri, err)
	}
	host := u.Hostname()
	if host == "" {
		return "", fmt.Errorf("adkgrpc: %q names no host", uri)
	}
	port := u.Port()
	if port == "" {
		port = kind.defaultPort()
	}
	return net.JoinHostPort(host, port), nil
}

// retryConfig is a gRPC service config that retries the given methods on UNAVAILABLE.
func retryConfig(methods []string, retries int) string {
	if retries <= 0 || len(methods) == 0 {
		return `{}`
	}
	names := make([]string, 0, len(methods))
	for _, m := range methods {
		service, method, _ := strings.Cut(m, "/")
		names = append(names, fmt.Sprintf(`{"service":%q,"method":%q}`, service, method))
	}
	return fmt.Sprintf(`{"methodConfig":[{"name":[%s],"retryPolicy":{"maxAttempts":%d,`+
		`"initialBackoff":"0.1s","maxBackoff":"2s","backoffMultiplier":2,`+
		`"retryableStatusCodes":["UNAVAILABLE"]}}]}`, strings.Join(names, ","), min(retries+1, 5))
}

// deadline bounds every unary call that the caller's context does not bound more tightly.
func deadline(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// bearer sends a token as "authorization: Bearer ...". Like the Python client, it is sent on
// plaintext connections too: deployments behind a TLS-terminating proxy use them.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
