//! `[membership]` of `cluster.toml` (splitkv_host::deploy::config::membership):
//! static by default; `kind = "etcd"` with its defaults; every rejection is
//! one line naming its field; a build without the cargo feature `etcd`
//! refuses `kind = "etcd"` as a config error.

use splitkv_host::deploy::{ClusterConfig, MembershipSettings};

/// A valid three-node file (cluster 9) followed by `extra`.
fn file(extra: &str) -> String {
    let nodes: String = (0..3)
        .map(|i| {
            format!(
                "[[node]]\nid = {i}\ndata = \"127.0.0.1:{}\"\ncontrol = \"127.0.0.1:{}\"\n",
                7100 + i,
                7200 + i
            )
        })
        .collect();
    format!("cluster_id = 9\ntoken = \"t0k\"\nreplication = 3\n{nodes}\n{extra}")
}

/// The one-line error of `text`, which must name `field`.
fn rejected_naming(text: &str, field: &str) -> String {
    let err = text.parse::<ClusterConfig>().expect_err("must be rejected");
    let line = err.to_string();
    assert!(!line.contains('\n'), "not one line: {line:?}");
    assert_eq!(err.field(), Some(field), "{line}");
    line
}

#[test]
fn without_the_section_membership_is_static() {
    let c: ClusterConfig = file("").parse().expect("valid");
    assert_eq!(c.membership, MembershipSettings::Static);
    let c: ClusterConfig = file("[membership]\nkind = \"static\"\n")
        .parse()
        .expect("valid");
    assert_eq!(c.membership, MembershipSettings::Static);
    rejected_naming(
        &file("[membership]\nkind = \"static\"\nlease_ttl_s = 2\n"),
        "membership",
    );
}

#[test]
fn unknown_kinds_and_fields_are_rejected() {
    let line = rejected_naming(
        &file("[membership]\nkind = \"zookeeper\"\n"),
        "membership.kind",
    );
    assert!(line.contains("zookeeper"), "{line}");
    let e = file("[membership]\nkind = \"etcd\"\nttl = 2\n").parse::<ClusterConfig>();
    assert!(e.is_err(), "unknown field accepted");
}

#[cfg(not(feature = "etcd"))]
#[test]
fn etcd_without_the_feature_is_one_config_error() {
    let text = file("[membership]\nkind = \"etcd\"\nendpoints = [\"http://127.0.0.1:2379\"]\n");
    let line = rejected_naming(&text, "membership.kind");
    assert!(line.contains("feature etcd"), "{line}");
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_settings_are_read_with_their_defaults_and_checked() {
    use splitkv_host::deploy::config::membership::{LEASE_TTL_S_DEFAULT, LEASE_TTL_S_MAX};
    let text = file("[membership]\nkind = \"etcd\"\nendpoints = [\"http://127.0.0.1:2379\"]\n");
    let c: ClusterConfig = text.parse().expect("valid");
    assert_eq!(
        c.membership,
        MembershipSettings::Etcd {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            lease_ttl_s: LEASE_TTL_S_DEFAULT,
            prefix: "splitkv-9".into(),
        }
    );
    rejected_naming(
        &file("[membership]\nkind = \"etcd\"\n"),
        "membership.endpoints",
    );
    let bad_url = "[membership]\nkind = \"etcd\"\nendpoints = [\"127.0.0.1:2379\"]\n";
    rejected_naming(&file(bad_url), "membership.endpoints[0]");
    let long = format!(
        "[membership]\nkind = \"etcd\"\nendpoints = [\"http://e:1\"]\nlease_ttl_s = {}\n",
        LEASE_TTL_S_MAX + 1
    );
    rejected_naming(&file(&long), "membership.lease_ttl_s");
    let slash = "[membership]\nkind = \"etcd\"\nendpoints = [\"http://e:1\"]\nprefix = \"a/b\"\n";
    rejected_naming(&file(slash), "membership.prefix");
}

/// The etcd client is built without TLS: an `https://` endpoint is refused
/// when the file is read, in one line naming the endpoint, not at the first
/// connection.
#[cfg(feature = "etcd")]
#[test]
fn https_endpoints_are_refused_in_one_line() {
    let text = file(
        "[membership]\nkind = \"etcd\"\nendpoints = [\"http://127.0.0.1:2379\", \"https://127.0.0.1:2380\"]\n",
    );
    let line = rejected_naming(&text, "membership.endpoints[1]");
    assert!(line.contains("https:// needs TLS"), "{line}");
}

/// The shipped etcd example (`examples/cluster-3-etcd.toml`) parses, with
/// its membership on etcd at the default client URL.
#[cfg(feature = "etcd")]
#[test]
fn the_shipped_etcd_example_parses() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster-3-etcd.toml");
    let config = ClusterConfig::from_file(path).expect("the example parses");
    assert_eq!(config.nodes.len(), 3);
    assert_eq!(
        config.membership,
        MembershipSettings::Etcd {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            lease_ttl_s: 2,
            prefix: "splitkv-3".into(),
        }
    );
}
