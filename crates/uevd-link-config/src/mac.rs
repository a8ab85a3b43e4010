//! The MAC address `MACAddressPolicy=` and `MACAddress=` ask for.
//!
//! A persistent address must come out the same on every boot and the
//! same as systemd's, since other machines (DHCP servers, switches) have
//! seen it: it is SipHash-2-4, keyed with systemd's fixed key, of the
//! machine id followed by the interface's most stable name.

use super::words::HwAddr;

/// systemd's key for hashing device names into addresses (also used by
/// networkd for IPv4LL).
const HASH_KEY: [u8; 16] = [
    0xd3, 0x1e, 0x48, 0xfa, 0x90, 0xfe, 0x4b, 0x4c, 0x9d, 0xaf, 0xd5, 0xd7, 0xa1, 0xb1, 0x2e, 0x8a,
];

pub const ARPHRD_ETHER: u16 = 1;
pub const ARPHRD_INFINIBAND: u16 = 32;
const ETH_ALEN: usize = 6;
const INFINIBAND_ALEN: usize = 20;

/// SipHash-2-4 with a 128-bit key and a 64-bit result.
pub fn siphash24(data: &[u8], key: &[u8; 16]) -> u64 {
    let k0 = u64::from_le_bytes(key[..8].try_into().unwrap());
    let k1 = u64::from_le_bytes(key[8..].try_into().unwrap());
    let mut v = [
        0x736f_6d65_7073_6575 ^ k0,
        0x646f_7261_6e64_6f6d ^ k1,
        0x6c79_6765_6e65_7261 ^ k0,
        0x7465_6462_7974_6573 ^ k1,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let compress = |v: &mut [u64; 4], m: u64| {
        v[3] ^= m;
        round(v);
        round(v);
        v[0] ^= m;
    };
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        compress(&mut v, u64::from_le_bytes(c.try_into().unwrap()));
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    last[7] = data.len() as u8;
    compress(&mut v, u64::from_le_bytes(last));
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// The 64 bits a persistent address is cut from, as the bytes of the
/// little-endian value.
pub fn predictable_data(machine_id: &[u8; 16], name: &[u8]) -> [u8; 8] {
    let input = [&machine_id[..], name].concat();
    siphash24(&input, &HASH_KEY).to_le_bytes()
}

/// The length of a hardware address of that type, 0 if uevd cannot tell.
pub fn addr_len(iftype: u16) -> usize {
    match iftype {
        ARPHRD_ETHER => ETH_ALEN,
        ARPHRD_INFINIBAND => INFINIBAND_ALEN,
        // Tunnels (TUNNEL, SIT, IPGRE) carry IPv4 addresses, TUNNEL6 and
        // IP6GRE IPv6 ones.
        768 | 776 | 778 => 4,
        769 | 823 => 16,
        _ => 0,
    }
}

/// The bytes a generated address may choose: all of an Ethernet address,
/// the last 8 (the GUID) of an InfiniBand one.
pub fn generated_part(iftype: u16) -> Option<std::ops::Range<usize>> {
    match iftype {
        ARPHRD_ETHER => Some(0..ETH_ALEN),
        ARPHRD_INFINIBAND => Some(INFINIBAND_ALEN - 8..INFINIBAND_ALEN),
        _ => None,
    }
}

/// A generated address the kernel would take: not all zeros, and for
/// Ethernet not broadcast.
pub fn generated_is_valid(iftype: u16, a: &[u8]) -> bool {
    match iftype {
        ARPHRD_ETHER => a.iter().any(|&b| b != 0) && a.iter().any(|&b| b != 0xff),
        ARPHRD_INFINIBAND => a[INFINIBAND_ALEN - 8..].iter().any(|&b| b != 0),
        _ => false,
    }
}

/// `net_verify_hardware_address()`: the address that will really be set,
/// or Err why none can be. A generated Ethernet address is made unicast
/// and locally administered; a static one only unicast. InfiniBand keeps
/// the first 12 bytes the interface has.
pub fn verify(
    iftype: u16,
    is_static: bool,
    current: &HwAddr,
    new: &HwAddr,
) -> Result<HwAddr, String> {
    let mut a = new.0.clone();
    if a.is_empty() {
        return Ok(HwAddr::default());
    }
    let want = addr_len(iftype);
    if a.len() != want {
        return Err(format!(
            "MAC address with invalid length ({}, expected {want}), refusing",
            a.len()
        ));
    }
    match iftype {
        ARPHRD_ETHER => {
            if a.iter().all(|&b| b == 0) {
                return Err("MAC address is null, refusing".into());
            }
            if a.iter().all(|&b| b == 0xff) {
                return Err("MAC address is broadcast, refusing".into());
            }
            a[0] &= 0xfe;
            if !is_static {
                a[0] |= 0x02;
            }
        }
        ARPHRD_INFINIBAND => {
            if a[INFINIBAND_ALEN - 8..].iter().all(|&b| b == 0) {
                return Err(
                    "the last 8 bytes of an InfiniBand address cannot be null, refusing".into(),
                );
            }
            if current.0.len() != INFINIBAND_ALEN {
                return Err("the interface has no InfiniBand address".into());
            }
            a[..INFINIBAND_ALEN - 8].copy_from_slice(&current.0[..INFINIBAND_ALEN - 8]);
        }
        _ => {
            return Err(format!(
                "unsupported interface type {iftype} to set MAC address, refusing"
            ))
        }
    }
    Ok(HwAddr(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_reference_vectors() {
        // The SipHash paper's test key (00..0f) and messages 00..(n-1).
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let msg: Vec<u8> = (0..64).collect();
        assert_eq!(siphash24(&msg[..0], &key), 0x726f_db47_dd0e_0e31);
        assert_eq!(siphash24(&msg[..1], &key), 0x74f8_39c5_93dc_67fd);
        assert_eq!(siphash24(&msg[..8], &key), 0x93f5_f579_9a93_2462);
        assert_eq!(siphash24(&msg[..15], &key), 0xa129_ca61_49be_45e5);
        assert_eq!(siphash24(&msg[..63], &key), 0x958a_324c_eb06_4572);
    }

    #[test]
    fn lab_guest_dummies_get_udevd_s_addresses() {
        // The lab guest's /etc/machine-id, and what udevd 252 set on its
        // dummy interfaces (lab/out/netifs-n1000-udevd/net.txt).
        let id = super::super::condition::id128_from_string(b"0123456789abcdef0123456789abcdef")
            .unwrap();
        for (name, want) in [
            ("dummy0", "ce:86:03:8c:2e:db"),
            ("dummy1", "de:96:f7:16:c8:3f"),
            ("dummy10", "aa:cf:c0:f9:dd:ae"),
            ("dummy999", "f6:24:73:e0:5a:d3"),
        ] {
            let data = predictable_data(&id, name.as_bytes());
            let a = verify(
                ARPHRD_ETHER,
                false,
                &HwAddr::default(),
                &HwAddr(data[..6].to_vec()),
            )
            .unwrap();
            assert_eq!(a.to_string(), want, "{name}");
        }
    }

    #[test]
    fn every_lab_dummy_got_this_address_from_udevd() {
        let net = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../lab/out/netifs-n1000-udevd/net.txt");
        let Ok(net) = std::fs::read_to_string(net) else {
            eprintln!("skipped: no lab results");
            return;
        };
        let id = super::super::condition::id128_from_string(b"0123456789abcdef0123456789abcdef")
            .unwrap();
        let mut n = 0;
        for line in net.lines().filter(|l| l.starts_with("dummy")) {
            let mut f = line.split_whitespace();
            let (name, theirs) = (f.next().unwrap(), f.next().unwrap());
            let data = predictable_data(&id, name.as_bytes());
            let ours = verify(
                ARPHRD_ETHER,
                false,
                &HwAddr::default(),
                &HwAddr(data[..6].to_vec()),
            )
            .unwrap();
            assert_eq!(ours.to_string(), theirs, "{name}");
            n += 1;
        }
        assert_eq!(n, 1000);
    }

    #[test]
    fn addresses_are_made_usable() {
        let cur = HwAddr(vec![0; 6]);
        let e =
            |b: &[u8], s| verify(ARPHRD_ETHER, s, &cur, &HwAddr(b.to_vec())).map(|a| a.to_string());
        assert_eq!(e(&[1, 2, 3, 4, 5, 6], false).unwrap(), "02:02:03:04:05:06");
        assert_eq!(e(&[1, 2, 3, 4, 5, 6], true).unwrap(), "00:02:03:04:05:06");
        assert!(e(&[0; 6], true).is_err());
        assert!(e(&[0xff; 6], false).is_err());
        assert!(e(&[1, 2, 3], true).is_err());
        assert_eq!(
            verify(ARPHRD_ETHER, true, &cur, &HwAddr::default()).unwrap(),
            HwAddr::default()
        );
        let ib_cur = HwAddr((0..20).collect());
        let mut ib_new = vec![0u8; 20];
        ib_new[19] = 9;
        let a = verify(ARPHRD_INFINIBAND, false, &ib_cur, &HwAddr(ib_new)).unwrap();
        assert_eq!(&a.0[..12], &ib_cur.0[..12]);
        assert_eq!(a.0[19], 9);
        assert!(verify(772, true, &cur, &HwAddr(vec![1; 6])).is_err());
    }
}
