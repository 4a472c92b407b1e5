package adkgrpc

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// codec is gRPC's protobuf codec, decoding with the UnmarshalVT methods generated into pb/ by
// vtprotobuf where a message has one: a session's events decode in a fifth to a half less time
// than through protobuf's reflection, the more parts they have the more (see
// BenchmarkUnmarshalSession). Everything else (encoding, messages without the method) goes to
// gRPC's own codec. Unlike protobuf, UnmarshalVT does not check that string fields hold valid
// UTF-8: the servers write them from Rust strings, which always do.
type codec struct{ encoding.CodecV2 }

type vtUnmarshaler interface{ UnmarshalVT([]byte) error }

func newCodec() codec { return codec{encoding.GetCodecV2(proto.Name)} }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(vtUnmarshaler)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return m.UnmarshalVT(buf.ReadOnlyData())
}
