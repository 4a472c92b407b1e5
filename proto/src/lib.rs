//! Generated Rust types, clients and server traits for the two gRPC packages:
//! `adk.session.v1` (session-svc), `adk.memory.v1` (memory-svc) and `adk.admin.v1` (both).
//!
//! The `.proto` files beside this crate are the contract; this crate only compiles them.

/// The session service contract.
pub mod session {
    /// Version 1 of `adk.session.v1`.
    // Generated: `WatchSessionResponse.change` holds a whole Event beside an empty marker.
    #[allow(clippy::large_enum_variant)]
    pub mod v1 {
        tonic::include_proto!("adk.session.v1");
    }
}

/// The memory service contract.
pub mod memory {
    /// Version 1 of `adk.memory.v1`.
    pub mod v1 {
        tonic::include_proto!("adk.memory.v1");
    }
}

/// The administration contract (online snapshots), served by both servers.
pub mod admin {
    /// Version 1 of `adk.admin.v1`.
    pub mod v1 {
        tonic::include_proto!("adk.admin.v1");
    }
}

/// Encoded `FileDescriptorSet` of both packages and their imports, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("adk_descriptor");
