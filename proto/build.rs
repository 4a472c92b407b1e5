//! Compiles the `.proto` files with protox (a pure-Rust compiler), so a fresh machine builds
//! with cargo alone, and writes the descriptor set that server reflection serves.

use std::{env, error::Error, fs, path::PathBuf};

use prost::Message;

const PROTOS: [&str; 3] = [
    "adk/session/v1/session.proto",
    "adk/memory/v1/memory.proto",
    "adk/admin/v1/admin.proto",
];

fn main() -> Result<(), Box<dyn Error>> {
    // tonic-prost-build 0.14 no longer emits these itself.
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(PROTOS, ["."])?;
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(
        out_dir.join("adk_descriptor.bin"),
        descriptors.encode_to_vec(),
    )?;
    // Without the `grpc` feature, the messages only.
    let grpc = env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_client(grpc)
        .build_server(grpc)
        .compile_fds(descriptors)?;
    Ok(())
}
