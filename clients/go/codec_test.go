package adkgrpc

import (
	"strconv"
	"testing"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

// sessionReply is the encoding of a session of n events of the usual kinds, with a field this
// client's contract does not know yet (as from a newer server) on every event.
func sessionReply(tb testing.TB, n int) []byte {
	tb.Helper()
	s := &sessionpb.Session{Id: "s", AppName: "app", UserId: "u", State: `{"k":1}`, LastSequence: uint64(n),
		LastUpdateTime: timestamppb.Now()}
	for i := range n {
		e := &sessionpb.Event{Id: "e-" + strconv.Itoa(i), InvocationId: "inv", Author: "model", Sequence: uint64(i + 1),
			Timestamp: timestamppb.Now(), Branch: proto.String("a.b"), LongRunningToolIds: []string{"t"},
			Actions: &sessionpb.EventActions{StateDelta: `{"turn":` + strconv.Itoa(i) + `}`,
				ArtifactDelta: map[string]int64{"f.txt": 2}, Escalate: proto.Bool(i%2 == 0)},
			Content: &sessionpb.Content{Role: proto.String("model"), Parts: []*sessionpb.Part{
				{Data: &sessionpb.Part_Text{Text: "the quick brown fox " + strconv.Itoa(i)}},
				{Data: &sessionpb.Part_FunctionCall{FunctionCall: &sessionpb.FunctionCall{
					Id: proto.String("c"), Name: proto.String("f"), Args: `{"x":[1,2]}`}}},
				{Data: &sessionpb.Part_InlineData{InlineData: &sessionpb.Blob{Data: []byte{0, 1, 2}}}, Thought: proto.Bool(true)},
			}},
		}
		e.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 999, protowire.BytesType), "newer"))
		s.Events = append(s.Events, e)
	}
	b, err := proto.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestCodecDecodesAsProtobuf(t *testing.T) {
	b := sessionReply(t, 3)
	var want, got sessionpb.Session
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if err := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&want, &got) {
		t.Errorf("decoded\n%v\nwant\n%v", &got, &want)
	}
	if err := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:len(b)-1])}, &got); err == nil {
		t.Error("a truncated message decoded without an error")
	}
}

func TestCodecFallsBackForOtherMessages(t *testing.T) {
	want := timestamppb.Now()
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got timestamppb.Timestamp
	if err := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(want, &got) {
		t.Errorf("decoded %v, want %v", &got, want)
	}
}

// A GetSession reply of 1,000 events, through this client's codec and through gRPC's own.
func BenchmarkUnmarshalSession(b *testing.B) {
	reply := mem.BufferSlice{mem.SliceBuffer(sessionReply(b, 1000))}
	for _, c := range []struct {
		name  string
		codec encoding.CodecV2
	}{{"vtprotobuf", newCodec()}, {"grpc", encoding.GetCodecV2(grpcproto.Name)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.codec.Unmarshal(reply, new(sessionpb.Session)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
