//! Generated Rust types, clients and server traits for the three gRPC packages:
//! `adk.session.v1` (session-svc), `adk.memory.v1` (memory-svc) and `adk.admin.v1` (both).
//!
//! The `.proto` files beside this crate are the contract; this crate only compiles them. Without
//! its default `grpc` feature it holds the messages alone (no tonic).

/// The session service contract.
pub mod session {
    /// Version 1 of `adk.session.v1`.
    // Generated: `WatchSessionResponse.change` holds a whole Event beside an empty marker.
    #[allow(clippy::large_enum_variant)]
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/adk.session.v1.rs"));
    }
}

/// The memory service contract.
pub mod memory {
    /// Version 1 of `adk.memory.v1`.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/adk.memory.v1.rs"));
    }
}

/// The administration contract (online snapshots), served by both servers.
pub mod admin {
    /// Version 1 of `adk.admin.v1`.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/adk.admin.v1.rs"));
    }
}

/// Encoded `FileDescriptorSet` of both packages and their imports, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/adk_descriptor.bin"));
