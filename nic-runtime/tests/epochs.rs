//! Epochs from membership (crash recovery's epochs;
//! `NicRuntime::apply_configuration`): a new configuration raises the
//! runtime's epoch, packets of older epochs are then dropped and counted
//! (never dispatched or answered), replies carry the new epoch, and the
//! nodes the configuration leaves out are failed for the coordinator.

mod support;

use splitkv_layout::wire::{decode_packet, BodyWriter, MsgKind};
use splitkv_layout::{Key, ObjectMeta, TxId};
use splitkv_nic::membership::Configuration;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::net::stack::StackConfig;
use splitkv_nic::net::{Transport, TxPacket};
use splitkv_nic::Placement;
use support::{lone_runtime, peer_packet};

/// A LOG from node 1 numbered `seq`, sent in `epoch`.
fn log_packet(seq: u32, epoch: u32) -> Vec<u8> {
    let mut w = BodyWriter::new();
    w.begin_items(MsgKind::Log, TxId::from_bits(7 + seq as u64));
    w.push_item(&Key::new(0, 1), ObjectMeta(1), b"x");
    let mut p = peer_packet(seq, &w);
    p[24..28].copy_from_slice(&epoch.to_le_bytes());
    p
}

#[test]
fn a_new_configuration_drops_and_counts_older_epoch_packets() {
    let mut net = mem_network(2);
    let mut peer = net.pop().unwrap();
    let transport = net.pop().unwrap();
    let mut lone = lone_runtime(
        Placement::new(2, 2).unwrap(),
        transport,
        64,
        StackConfig::default(),
    );
    let nic = &mut lone.nic;
    let first = Configuration::initial(2, 2);
    nic.apply_configuration(&first);
    assert_eq!(nic.epoch(), 1);
    let next = Configuration { epoch: 2, ..first };
    nic.apply_configuration(&next);
    assert_eq!(nic.epoch(), 2);
    nic.apply_configuration(&first);
    assert_eq!(
        nic.epoch(),
        2,
        "an older configuration never lowers the epoch"
    );

    // The old-epoch packet still takes its number (no gap), so the next
    // one is numbered 1.
    let (old, new) = (log_packet(0, 1), log_packet(1, 2));
    peer.tx_burst(
        0,
        &[TxPacket {
            dst: 0,
            bytes: &old,
        }],
    );
    for now in 0..5 {
        nic.run_iteration(now);
    }
    let s = nic.stats().net.sessions;
    assert_eq!((s.drops.old_epoch, s.packets_received), (1, 0));
    let mut replies = Vec::new();
    peer.rx_burst(5, 16, &mut |p| replies.push(decode_packet(p).unwrap().0));
    replies.retain(|h| !h.is_ack_only());
    assert!(replies.is_empty(), "an old-epoch packet is never answered");

    peer.tx_burst(
        5,
        &[TxPacket {
            dst: 0,
            bytes: &new,
        }],
    );
    for now in 5..10 {
        nic.run_iteration(now);
    }
    let s = nic.stats().net.sessions;
    assert_eq!((s.drops.old_epoch, s.packets_received), (1, 1));
    peer.rx_burst(10, 16, &mut |p| replies.push(decode_packet(p).unwrap().0));
    replies.retain(|h| !h.is_ack_only());
    assert_eq!(replies.len(), 1, "the current-epoch LOG is acknowledged");
    assert_eq!(replies[0].epoch, 2, "replies carry the new epoch");
}

#[test]
fn a_configuration_without_a_node_fails_it_for_the_coordinator() {
    let mut net = mem_network(3);
    let transport = net.remove(0);
    let mut lone = lone_runtime(
        Placement::new(3, 2).unwrap(),
        transport,
        64,
        StackConfig::default(),
    );
    let nic = &mut lone.nic;
    let first = Configuration::initial(3, 2);
    nic.apply_configuration(&first);
    assert_eq!(nic.failed_peers(), 0);
    nic.apply_configuration(&first.without(1 << 2));
    assert_eq!(nic.failed_peers(), 1 << 2);
    assert_eq!(nic.epoch(), 2);
    assert_eq!(nic.stats().coordinator.deadlines.peers_failed, 1);
}
