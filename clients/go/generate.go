// Package adkgrpc is the root of the Go client of adk-services: [grpcsession] and [grpcmemory]
// plug session-svc and memory-svc into ADK Go as its session.Service and memory.Service.
//
// The stubs in pb/ are generated from the contract in proto/ by buf (npm @bufbuild/buf) with
// this module's pinned protoc-gen-go and protoc-gen-go-grpc (generate.sh; buf from
// $BUF, PATH or npm):
//
//	go generate .
package adkgrpc

//go:generate ./generate.sh
