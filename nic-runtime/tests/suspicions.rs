//! The rule by which a membership manager takes a suspect report
//! (`Configuration::takes_suspicion`): a suspect's own reports do
//! not count, and no suspicion strands a shard.

use splitkv_nic::membership::Configuration;

#[test]
fn a_report_from_a_member_on_a_member_is_taken() {
    let c = Configuration::initial(5, 3);
    assert!(c.takes_suspicion(0, 1, 2));
    assert_eq!(c.taken_suspicions([(1, 2)]), 1 << 2);
}

#[test]
fn a_suspects_own_reports_are_ignored() {
    let c = Configuration::initial(5, 3);
    // 0 suspects 1 first; 1, cut off, then suspects everyone.
    let taken = c.taken_suspicions([(0, 1), (1, 0), (1, 2), (1, 3), (1, 4)]);
    assert_eq!(taken, 1 << 1);
    // The order decides: the first report wins.
    assert_eq!(c.taken_suspicions([(1, 0), (0, 1)]), 1 << 0);
}

#[test]
fn reports_from_or_on_non_members_and_on_oneself_are_ignored() {
    let c = Configuration::initial(5, 3).without(1 << 4);
    assert!(
        !c.takes_suspicion(0, 4, 1),
        "reporter out of the configuration"
    );
    assert!(
        !c.takes_suspicion(0, 1, 4),
        "suspect out of the configuration"
    );
    assert!(!c.takes_suspicion(0, 2, 2), "a node suspecting itself");
    assert!(!c.takes_suspicion(0, 40, 1), "reporter beyond the node ids");
    assert!(!c.takes_suspicion(0, 1, 40), "suspect beyond the node ids");
}

#[test]
fn no_suspicion_strands_a_shard() {
    // 5 nodes, 3 replicas: shard s on s, s+1, s+2. Suspecting 1 and 2 is
    // fine (every shard keeps a replica); adding 3 would leave shard 1
    // (on 1, 2, 3) with none.
    let c = Configuration::initial(5, 3);
    assert!(!c.strands_a_shard(0b00110));
    assert!(c.strands_a_shard(0b01110));
    let taken = c.taken_suspicions([(0, 1), (0, 2), (0, 3), (4, 3)]);
    assert_eq!(taken, 0b00110);
    // 3 nodes, 3 replicas: the reporter alone holds every shard.
    let c = Configuration::initial(3, 3);
    assert_eq!(c.taken_suspicions([(0, 1), (0, 2)]), 0b110);
    // 3 nodes, 2 replicas: shard 1 is on 1 and 2 only.
    let c = Configuration::initial(3, 2);
    assert_eq!(c.taken_suspicions([(0, 1), (0, 2)]), 1 << 1);
}

#[test]
fn a_joining_backup_is_no_replica_for_stranding() {
    // Node 0 restarted and rejoins: it is copying, a joining member of its
    // shards, holding only part of their data.
    let c = Configuration::initial(3, 3).without(1 << 0);
    let c = c.rejoining(0, 2).expect("node 0 out");
    assert!(c.is_copying(0));
    // Shard 0 is on 0 (joining), 1 and 2: suspecting 1 leaves 2.
    assert!(c.takes_suspicion(0, 0, 1));
    // Suspecting 1 and 2 would leave shard 0 only with the joining node 0.
    assert!(c.strands_a_shard(0b110));
    assert_eq!(c.taken_suspicions([(0, 1), (0, 2)]), 1 << 1);
}
