// splitkv's copy of etcd-client 0.21.1 (see README.md): the one change from
// upstream is `use_vendored_protoc`, so that a machine without a system
// `protoc` builds this crate (`PROTOC`, when set, still wins).

#[cfg(feature = "build-server")]
fn should_build_server() -> bool {
    true
}

#[cfg(not(feature = "build-server"))]
fn should_build_server() -> bool {
    false
}

/// Points `PROTOC` at the `protoc` binary shipped in the protoc-bin-vendored
/// crate (one per platform, Linux x86_64 and aarch64 among them) unless the
/// environment already names one; prost-build reads `PROTOC`.
fn use_vendored_protoc() {
    println!("cargo:rerun-if-env-changed=PROTOC");
    if std::env::var_os("PROTOC").is_none() {
        let protoc = protoc_bin_vendored::protoc_bin_path()
            .expect("protoc-bin-vendored has no protoc for this platform: set PROTOC");
        std::env::set_var("PROTOC", protoc);
    }
}

fn main() {
    use_vendored_protoc();
    let proto_root = "proto";
    println!("cargo:rerun-if-changed={proto_root}");

    tonic_prost_build::configure()
        .build_server(should_build_server())
        .compile_protos(
            &[
                "proto/etcd/api/authpb/auth.proto",
                "proto/etcd/api/etcdserverpb/rpc.proto",
                "proto/etcd/api/mvccpb/kv.proto",
                "proto/etcd/server/etcdserver/api/v3election/v3electionpb/v3election.proto",
                "proto/etcd/server/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
            ],
            &[proto_root],
        )
        .expect("Failed to compile proto files");
}
