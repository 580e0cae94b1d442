//! Compiles `proto/xjob/v1/*.proto` with a vendored `protoc` (no system install needed) and
//! writes the descriptor set that the admin serves through gRPC reflection.

use std::path::PathBuf;

const PROTOS: [&str; 4] = [
    "proto/xjob/v1/common.proto",
    "proto/xjob/v1/executor.proto",
    "proto/xjob/v1/registry.proto",
    "proto/xjob/v1/admin.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    println!("cargo:rerun-if-env-changed=PROTOC");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut prost_config = tonic_prost_build::Config::new();
    // A PROTOC variable set by the user wins; otherwise use the binary shipped in the crate.
    let protoc = match std::env::var_os("PROTOC") {
        Some(path) => PathBuf::from(path),
        None => protoc_bin_vendored::protoc_bin_path()?,
    };
    prost_config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("xjob_descriptor.bin"))
        .compile_with_config(prost_config, &PROTOS, &["proto"])?;
    Ok(())
}
