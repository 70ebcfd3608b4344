//! Ethernet II + IPv4 + UDP headers around a splitkv packet: built on the
//! send side and checked on the receive side, so that ordinary switches and
//! routers forward the frames and a receiver can tell its own traffic from
//! anything else on the wire. Pure byte work, no DPDK.
//!
//! Frame layout (all fields big-endian), [`FRAME_HEADER_BYTES`] = 42 B
//! before the packet:
//!
//! | bytes | field |
//! |---|---|
//! | 0..6 / 6..12 | destination / source MAC |
//! | 12..14 | EtherType 0x0800 (IPv4; no VLAN tag) |
//! | 14..34 | IPv4 header: version 4, IHL 5 (no options), total length, DF set, TTL 64, protocol 17, header checksum, source / destination address |
//! | 34..42 | UDP header: source / destination port, length, checksum 0 ("none", allowed over IPv4) |
//!
//! The UDP checksum is not computed: the Ethernet FCS (checked by the NIC)
//! covers the link, as it does for kernel UDP with checksum offload; the IPv4
//! header checksum is computed and checked. Frames may carry Ethernet
//! padding after the IPv4 datagram (frames shorter than 60 B are padded on
//! the wire); the IPv4 total length says where the datagram ends.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Ethernet II header bytes (two MACs and the EtherType).
pub const ETHERNET_HEADER_BYTES: usize = 14;
/// IPv4 header bytes without options (IHL 5).
pub const IPV4_HEADER_BYTES: usize = 20;
/// UDP header bytes.
pub const UDP_HEADER_BYTES: usize = 8;
/// Bytes of headers before a splitkv packet in a frame.
pub const FRAME_HEADER_BYTES: usize = ETHERNET_HEADER_BYTES + IPV4_HEADER_BYTES + UDP_HEADER_BYTES;
/// Largest UDP payload an IPv4 datagram can carry (its 16-bit total length
/// less the IPv4 and UDP headers).
pub const UDP_PAYLOAD_BYTES_MAX: usize = u16::MAX as usize - IPV4_HEADER_BYTES - UDP_HEADER_BYTES;

const ETHERTYPE_IPV4: u16 = 0x0800;
const IP_PROTO_UDP: u8 = 17;
const IP_TTL: u8 = 64;
/// Flags and fragment offset: Don't Fragment, offset 0.
const IP_FLAGS_DF: u16 = 0x4000;
/// More Fragments flag and the fragment offset mask.
const IP_FRAGMENT_MASK: u16 = 0x3fff;

/// An Ethernet MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
}

impl std::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl std::fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// A MAC address that is not six two-digit hex bytes separated by `:`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a MAC address (six hex bytes separated by ':', e.g. 02:00:00:00:00:01)")]
pub struct MacAddrError {
    /// The text given.
    pub text: String,
}

impl std::str::FromStr for MacAddr {
    type Err = MacAddrError;

    fn from_str(s: &str) -> Result<MacAddr, MacAddrError> {
        let err = || MacAddrError {
            text: s.to_string(),
        };
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for b in &mut out {
            let p = parts.next().ok_or_else(err)?;
            if p.len() != 2 {
                return Err(err());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr(out))
    }
}

/// One end of a frame: the MAC and the UDP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameEnd {
    /// Ethernet address.
    pub mac: MacAddr,
    /// IPv4 address and UDP port.
    pub addr: SocketAddrV4,
}

/// Why a received frame was not a splitkv packet for this endpoint
/// (dropped and counted by reason, never a panic). The first nine are
/// found by [`parse`]; the rest by the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[repr(usize)]
pub enum RxDrop {
    /// Shorter than its headers, or than its IPv4 or UDP length says.
    #[error("truncated frame")]
    Truncated,
    /// Not IPv4 (ARP, IPv6, a VLAN tag, ...).
    #[error("not IPv4")]
    NotIpv4,
    /// An IPv4 header that is not version 4 / IHL 5, has a total length
    /// below its headers, or a wrong checksum.
    #[error("bad IPv4 header")]
    BadIpHeader,
    /// A fragment of a larger IPv4 datagram (splitkv never fragments).
    #[error("IPv4 fragment")]
    Fragmented,
    /// Not UDP.
    #[error("not UDP")]
    NotUdp,
    /// A UDP length that disagrees with the IPv4 total length.
    #[error("bad UDP header")]
    BadUdpHeader,
    /// For another MAC (neither this endpoint's nor broadcast) or another
    /// IPv4 address.
    #[error("for another host")]
    OtherHost,
    /// For another UDP port of this host.
    #[error("for another port")]
    OtherPort,
    /// A packet longer than the transport's MTU.
    #[error("longer than the MTU")]
    Oversized,
    /// A chained (multi-segment) mbuf: the transport lends contiguous bytes only.
    #[error("chained mbuf")]
    Chained,
    /// From an address that is no configured peer's.
    #[error("from a stranger")]
    Stranger,
    /// From a former address of a re-pointed peer (an earlier incarnation).
    #[error("from a former peer address")]
    StaleAddress,
}

impl RxDrop {
    /// Number of reasons.
    pub const COUNT: usize = 12;
    /// Every reason, in counter order.
    pub const ALL: [RxDrop; RxDrop::COUNT] = [
        RxDrop::Truncated,
        RxDrop::NotIpv4,
        RxDrop::BadIpHeader,
        RxDrop::Fragmented,
        RxDrop::NotUdp,
        RxDrop::BadUdpHeader,
        RxDrop::OtherHost,
        RxDrop::OtherPort,
        RxDrop::Oversized,
        RxDrop::Chained,
        RxDrop::Stranger,
        RxDrop::StaleAddress,
    ];

    /// A short snake_case name (metrics labels).
    pub fn name(self) -> &'static str {
        match self {
            RxDrop::Truncated => "truncated",
            RxDrop::NotIpv4 => "not_ipv4",
            RxDrop::BadIpHeader => "bad_ip_header",
            RxDrop::Fragmented => "fragmented",
            RxDrop::NotUdp => "not_udp",
            RxDrop::BadUdpHeader => "bad_udp_header",
            RxDrop::OtherHost => "other_host",
            RxDrop::OtherPort => "other_port",
            RxDrop::Oversized => "oversized",
            RxDrop::Chained => "chained",
            RxDrop::Stranger => "stranger",
            RxDrop::StaleAddress => "stale_address",
        }
    }
}

/// A frame [`parse`] accepted: the sender's UDP address and where the
/// packet lies in the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Source IPv4 address and UDP port.
    pub src: SocketAddrV4,
    /// The packet's bytes: `frame[payload]`.
    pub payload: std::ops::Range<usize>,
}

/// The ones'-complement sum of 16-bit big-endian words, folded (RFC 1071).
fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for w in bytes.chunks(2) {
        let word = u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes the headers of a frame from `src` to `dst` carrying a packet of
/// `payload_bytes` (≤ [`UDP_PAYLOAD_BYTES_MAX`]) into `out`, which is
/// [`FRAME_HEADER_BYTES`] long; the packet goes right after them.
pub fn write_headers(
    out: &mut [u8; FRAME_HEADER_BYTES],
    src: &FrameEnd,
    dst: &FrameEnd,
    payload_bytes: usize,
) {
    debug_assert!(payload_bytes <= UDP_PAYLOAD_BYTES_MAX);
    let udp_len = (UDP_HEADER_BYTES + payload_bytes) as u16;
    let ip_len = IPV4_HEADER_BYTES as u16 + udp_len;
    out[0..6].copy_from_slice(&dst.mac.0);
    out[6..12].copy_from_slice(&src.mac.0);
    out[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let ip = &mut out[ETHERNET_HEADER_BYTES..ETHERNET_HEADER_BYTES + IPV4_HEADER_BYTES];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&[0, 0]); // identification: unused with DF (RFC 6864)
    ip[6..8].copy_from_slice(&IP_FLAGS_DF.to_be_bytes());
    ip[8] = IP_TTL;
    ip[9] = IP_PROTO_UDP;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&src.addr.ip().octets());
    ip[16..20].copy_from_slice(&dst.addr.ip().octets());
    let sum = checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut out[ETHERNET_HEADER_BYTES + IPV4_HEADER_BYTES..];
    udp[0..2].copy_from_slice(&src.addr.port().to_be_bytes());
    udp[2..4].copy_from_slice(&dst.addr.port().to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Checks that `frame` is an Ethernet/IPv4/UDP frame for `local` (its MAC or
/// broadcast, its IPv4 address, its UDP port) and finds the packet in it.
///
/// # Errors
/// The first [`RxDrop`] reason that applies, checked outside in: length,
/// EtherType, IPv4 header, fragment, protocol, UDP length, host, port.
pub fn parse(frame: &[u8], local: &FrameEnd) -> Result<Parsed, RxDrop> {
    if frame.len() < FRAME_HEADER_BYTES {
        return Err(RxDrop::Truncated);
    }
    if be16(frame, 12) != ETHERTYPE_IPV4 {
        return Err(RxDrop::NotIpv4);
    }
    let ip = &frame[ETHERNET_HEADER_BYTES..ETHERNET_HEADER_BYTES + IPV4_HEADER_BYTES];
    let ip_len = usize::from(be16(ip, 2));
    if ip[0] != 0x45 || ip_len < IPV4_HEADER_BYTES + UDP_HEADER_BYTES || checksum(ip) != 0 {
        return Err(RxDrop::BadIpHeader);
    }
    if ETHERNET_HEADER_BYTES + ip_len > frame.len() {
        return Err(RxDrop::Truncated);
    }
    if be16(ip, 6) & IP_FRAGMENT_MASK != 0 {
        return Err(RxDrop::Fragmented);
    }
    if ip[9] != IP_PROTO_UDP {
        return Err(RxDrop::NotUdp);
    }
    let udp = &frame[ETHERNET_HEADER_BYTES + IPV4_HEADER_BYTES..];
    if usize::from(be16(udp, 4)) != ip_len - IPV4_HEADER_BYTES {
        return Err(RxDrop::BadUdpHeader);
    }
    let dst_mac = MacAddr(frame[0..6].try_into().expect("six bytes"));
    let dst_ip = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    if (dst_mac != local.mac && dst_mac != MacAddr::BROADCAST) || dst_ip != *local.addr.ip() {
        return Err(RxDrop::OtherHost);
    }
    if be16(udp, 2) != local.addr.port() {
        return Err(RxDrop::OtherPort);
    }
    let src = SocketAddrV4::new(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]), be16(udp, 0));
    Ok(Parsed {
        src,
        payload: FRAME_HEADER_BYTES..ETHERNET_HEADER_BYTES + ip_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn end(last: u8, port: u16) -> FrameEnd {
        FrameEnd {
            mac: MacAddr([2, 0, 0, 0, 0, last]),
            addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), port),
        }
    }

    fn frame(src: &FrameEnd, dst: &FrameEnd, payload: &[u8]) -> Vec<u8> {
        let mut h = [0u8; FRAME_HEADER_BYTES];
        write_headers(&mut h, src, dst, payload.len());
        let mut f = h.to_vec();
        f.extend_from_slice(payload);
        f
    }

    /// Recomputes the IPv4 checksum after a test edits the header.
    fn reseal(f: &mut [u8]) {
        f[24..26].copy_from_slice(&[0, 0]);
        let sum = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
    }

    #[test]
    fn a_built_frame_parses_back() {
        let (a, b) = (end(1, 7000), end(2, 7001));
        let f = frame(&a, &b, b"hello");
        assert_eq!(f.len(), FRAME_HEADER_BYTES + 5);
        let p = parse(&f, &b).unwrap();
        assert_eq!(p.src, a.addr);
        assert_eq!(&f[p.payload], b"hello");
        // An empty packet and Ethernet padding after the datagram.
        let mut padded = frame(&a, &b, b"");
        padded.resize(60, 0xee);
        let p = parse(&padded, &b).unwrap();
        assert!(p.payload.is_empty());
    }

    #[test]
    fn the_ip_checksum_matches_a_known_header() {
        // A published example header (192.168.0.1 → 192.168.0.199, UDP,
        // total length 115) whose checksum is 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(checksum(&h), 0, "a sealed header sums to zero");
        // And the builder seals its own.
        let f = frame(&end(1, 7000), &end(2, 7001), &[0; 100]);
        assert_eq!(checksum(&f[14..34]), 0);
    }

    #[test]
    fn every_reason_is_found() {
        let (a, b) = (end(1, 7000), end(2, 7001));
        let good = frame(&a, &b, b"payload!");
        type Edit = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(RxDrop, Edit)> = vec![
            (RxDrop::Truncated, Box::new(|f| f.truncate(41))),
            (RxDrop::Truncated, Box::new(|f| f.truncate(45))),
            (
                RxDrop::NotIpv4,
                Box::new(|f| f[12..14].copy_from_slice(&[0x86, 0xdd])),
            ),
            (
                RxDrop::NotIpv4,
                Box::new(|f| f[12..14].copy_from_slice(&[0x81, 0x00])),
            ),
            (RxDrop::BadIpHeader, Box::new(|f| f[14] = 0x46)),
            (RxDrop::BadIpHeader, Box::new(|f| f[30] ^= 1)),
            (
                RxDrop::BadIpHeader,
                Box::new(|f| {
                    f[16..18].copy_from_slice(&20u16.to_be_bytes());
                    reseal(f)
                }),
            ),
            (
                RxDrop::Fragmented,
                Box::new(|f| {
                    f[20..22].copy_from_slice(&0x2000u16.to_be_bytes());
                    reseal(f)
                }),
            ),
            (
                RxDrop::NotUdp,
                Box::new(|f| {
                    f[23] = 6;
                    reseal(f)
                }),
            ),
            (RxDrop::BadUdpHeader, Box::new(|f| f[39] = 9)),
            (RxDrop::OtherHost, Box::new(|f| f[5] = 9)),
            (
                RxDrop::OtherHost,
                Box::new(|f| {
                    f[33] = 9;
                    reseal(f)
                }),
            ),
            (RxDrop::OtherPort, Box::new(|f| f[37] ^= 1)),
        ];
        for (i, (want, edit)) in cases.iter().enumerate() {
            let mut f = good.clone();
            edit(&mut f);
            assert_eq!(parse(&f, &b), Err(*want), "case {i}");
        }
        let mut to_all = good.clone();
        to_all[0..6].copy_from_slice(&[0xff; 6]);
        assert!(parse(&to_all, &b).is_ok(), "broadcast MAC is accepted");
    }

    #[test]
    fn reasons_have_distinct_names_in_counter_order() {
        for (i, r) in RxDrop::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut names: Vec<_> = RxDrop::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), RxDrop::COUNT);
    }

    #[test]
    fn mac_addresses_parse_and_print() {
        let m: MacAddr = "02:00:0a:ff:00:01".parse().unwrap();
        assert_eq!(m, MacAddr([2, 0, 0x0a, 0xff, 0, 1]));
        assert_eq!(m.to_string(), "02:00:0a:ff:00:01");
        for bad in [
            "",
            "02:00:0a:ff:00",
            "02:00:0a:ff:00:01:02",
            "2:00:0a:ff:00:01",
            "0g:00:00:00:00:00",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?}");
        }
    }

    proptest! {
        /// Any bytes: a reason or a payload inside the frame, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let b = end(2, 7001);
            if let Ok(p) = parse(&bytes, &b) {
                prop_assert!(p.payload.end <= bytes.len());
            }
        }

        /// Any payload round-trips.
        #[test]
        fn payloads_round_trip(payload in proptest::collection::vec(any::<u8>(), 0..1500)) {
            let (a, b) = (end(1, 7000), end(2, 7001));
            let f = frame(&a, &b, &payload);
            let p = parse(&f, &b).unwrap();
            prop_assert_eq!(&f[p.payload], &payload[..]);
        }
    }
}
