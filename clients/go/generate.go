package adkgrpc

// The stubs in pb/ are generated from the contract in proto/ by buf (npm @bufbuild/buf) with
// this module's pinned protoc-gen-go, protoc-gen-go-grpc and protoc-gen-go-vtproto; see
// generate.sh.
//go:generate ./generate.sh
