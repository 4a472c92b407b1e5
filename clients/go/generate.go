package adkgrpc

// The stubs in pb/ are generated from the contract in proto/ by buf (npm @bufbuild/buf) with
// this module's pinned protoc-gen-go and protoc-gen-go-grpc; see generate.sh.
//go:generate ./generate.sh
