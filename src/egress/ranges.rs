//! The addresses no allowed name may lead to: the host itself, the
//! cloud's metadata service, the networks behind the host. A name is
//! checked by what it resolves to, so a public name pointed at
//! `127.0.0.1` or `169.254.169.254` gains nothing. An operator may open a
//! range (`[egress] allow_ranges`), as the tests open `127.0.0.2/32`.

use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused: said in the denial a program gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// The host itself (`127.0.0.0/8`, `::1`).
    Loopback,
    /// `169.254.0.0/16` and `fe80::/10`, where the metadata service lives.
    LinkLocal,
    /// RFC 1918, `100.64.0.0/10` (carrier-grade NAT), `fc00::/7`.
    Private,
    /// `0.0.0.0/8`, `::`, multicast, broadcast, the reserved `240.0.0.0/4`,
    /// documentation and benchmarking ranges: nothing a program should
    /// reach through a proxy.
    Special,
}

impl Reserved {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::LinkLocal => "link-local (metadata)",
            Self::Private => "private",
            Self::Special => "reserved",
        }
    }
}

/// What the proxy may connect to: every public address, and the ranges
/// the operator opened.
#[derive(Debug, Clone, Default)]
pub struct Ranges {
    opened: Vec<IpNet>,
}

impl Ranges {
    pub fn new(opened: Vec<IpNet>) -> Self {
        Self { opened }
    }

    /// `None` when the proxy may connect to `addr`; else why not.
    pub fn refuses(&self, addr: IpAddr) -> Option<Reserved> {
        let addr = canonical(addr);
        if self.opened.iter().any(|net| net.contains(&addr)) {
            return None;
        }
        match addr {
            IpAddr::V4(v4) => reserved_v4(v4),
            IpAddr::V6(v6) => reserved_v6(v6),
        }
    }
}

/// An IPv4 address written as IPv6 (`::ffff:127.0.0.1`, or the NAT64
/// well-known prefix) is judged as the IPv4 address it reaches.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None if v6.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] => {
                let [.., a, b] = v6.segments();
                IpAddr::V4(Ipv4Addr::from((u32::from(a) << 16) | u32::from(b)))
            }
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

fn reserved_v4(a: Ipv4Addr) -> Option<Reserved> {
    let [first, second, ..] = a.octets();
    if a.is_loopback() {
        Some(Reserved::Loopback)
    } else if a.is_link_local() {
        Some(Reserved::LinkLocal)
    } else if a.is_private() || (first == 100 && (64..128).contains(&second)) {
        Some(Reserved::Private)
    } else if first == 0
        || a.is_multicast()
        || a.is_broadcast()
        || first >= 240
        || a.is_documentation()
        || (first == 198 && (18..20).contains(&second))
        || (first == 192 && second == 0 && a.octets()[2] == 0)
    {
        Some(Reserved::Special)
    } else {
        None
    }
}

fn reserved_v6(a: Ipv6Addr) -> Option<Reserved> {
    let head = a.segments()[0];
    if a.is_loopback() {
        Some(Reserved::Loopback)
    } else if head & 0xffc0 == 0xfe80 {
        Some(Reserved::LinkLocal)
    } else if head & 0xfe00 == 0xfc00 {
        Some(Reserved::Private)
    } else if a.is_unspecified()
        || a.is_multicast()
        || head == 0x2001 && a.segments()[1] == 0x0db8
        // Deprecated site-local, and 6to4/Teredo, which tunnel to IPv4
        // addresses this check would not see.
        || head & 0xffc0 == 0xfec0
        || head == 0x2002
        || (head == 0x2001 && a.segments()[1] == 0)
    {
        Some(Reserved::Special)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> Option<Reserved> {
        Ranges::default().refuses(text.parse().unwrap())
    }

    #[test]
    fn the_host_the_metadata_service_and_private_networks_are_refused() {
        for (addr, why) in [
            ("127.0.0.1", Reserved::Loopback),
            ("127.0.0.2", Reserved::Loopback),
            ("::1", Reserved::Loopback),
            ("::ffff:127.0.0.1", Reserved::Loopback),
            ("64:ff9b::7f00:1", Reserved::Loopback),
            ("169.254.169.254", Reserved::LinkLocal),
            ("::ffff:169.254.169.254", Reserved::LinkLocal),
            ("fe80::1", Reserved::LinkLocal),
            ("10.1.2.3", Reserved::Private),
            ("172.16.0.1", Reserved::Private),
            ("192.168.1.1", Reserved::Private),
            ("100.100.100.200", Reserved::Private),
            ("fd00::1", Reserved::Private),
            ("0.0.0.0", Reserved::Special),
            ("::", Reserved::Special),
            ("255.255.255.255", Reserved::Special),
            ("224.0.0.1", Reserved::Special),
            ("2002:7f00:1::", Reserved::Special),
        ] {
            assert_eq!(refused(addr), Some(why), "{addr}");
        }
    }

    #[test]
    fn public_addresses_pass_and_an_opened_range_passes() {
        for addr in ["93.184.215.14", "140.82.112.6", "2606:4700::1111"] {
            assert_eq!(refused(addr), None, "{addr}");
        }
        let opened = Ranges::new(vec!["127.0.0.2/32".parse().unwrap()]);
        assert_eq!(opened.refuses("127.0.0.2".parse().unwrap()), None);
        assert_eq!(
            opened.refuses("127.0.0.1".parse().unwrap()),
            Some(Reserved::Loopback)
        );
        assert_eq!(opened.refuses("::ffff:127.0.0.2".parse().unwrap()), None);
    }
}
