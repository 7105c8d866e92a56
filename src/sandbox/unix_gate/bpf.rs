//! The gate's seccomp program, written by hand: seccompiler 0.5 has no
//! user-notification action (`SECCOMP_RET_USER_NOTIF`).
//!
//! It holds all of `network: false`'s rules, in one filter rather than
//! three: the kernel compiles each filter of each run anew (50 to 200 µs
//! apiece on the hosts measured), and these three rules are a few
//! instructions each. In order:
//! - the architecture: a call through another ABI (i386's `int 0x80` on
//!   x86_64, whose numbers differ) kills the process;
//! - on x86_64, x32's numbers (bit 30 set) fail `ENOSYS`, as on a kernel
//!   without x32: its `connect` and `socket` are other numbers;
//! - `connect` goes to the server, which decides it;
//! - `socket` and `socketpair` of any family but `AF_UNIX` fail
//!   `EAFNOSUPPORT` (IP, netlink, vsock, packet: as a kernel without the
//!   family would say), and connectionless unix ones (`SOCK_DGRAM`, and
//!   `SOCK_RAW`, which the kernel makes one) fail `EACCES`: `sendmsg`
//!   reaches any named datagram listener through its `msg_name`, an
//!   address behind a pointer no filter reads.
//!
//! Everything else passes: the other filters decide it.

/// A seccomp program, as seccompiler makes them.
pub(crate) type Program = seccompiler::BpfProgram;

use seccompiler::sock_filter;

/// `struct seccomp_data`: the call's number, its architecture, and the
/// low 32 bits (little-endian) of its first two arguments, which the
/// kernel reads as ints.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;
const ARG1: u32 = 24;

/// Bit 30 of the number marks x32's calls (`__X32_SYSCALL_BIT`).
const X32_BIT: u32 = 0x4000_0000;

#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(all(target_arch = "aarch64", target_endian = "little"))]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_endian = "little"
)))]
const AUDIT_ARCH: Option<u32> = None;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const fn op(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

const fn errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | errno.unsigned_abs()
}

/// The program, or `None` on an architecture it was not written for;
/// `ip` for a run whose network is its egress namespace: `AF_INET` and
/// `AF_INET6` sockets open too, and their connects come to the server as
/// well (see the supervisor). Jumps are counted from the next
/// instruction; the comments name where they land.
pub(super) fn gate(ip: bool) -> Option<Program> {
    let arch = AUDIT_ARCH?;
    let nr = |n: i64| u32::try_from(n).ok();
    // x86_64 alone has x32; elsewhere no number reaches the bit.
    let x32 = if cfg!(target_arch = "x86_64") {
        X32_BIT
    } else {
        u32::MAX
    };
    let calls = Calls {
        connect: nr(libc::SYS_connect)?,
        socket: nr(libc::SYS_socket)?,
        socketpair: nr(libc::SYS_socketpair)?,
    };
    Some(if ip {
        with_ip(arch, x32, &calls)
    } else {
        unix_only(arch, x32, &calls)
    })
}

/// The numbers of the calls the gate looks at.
struct Calls {
    connect: u32,
    socket: u32,
    socketpair: u32,
}

fn unix_only(arch: u32, x32: u32, calls: &Calls) -> Program {
    let unix = libc::AF_UNIX.unsigned_abs();
    vec![
        /* 0 */ op(LD_W_ABS, 0, 0, ARCH),
        /* 1 */ op(JEQ, 1, 0, arch), // 3, else 2
        /* 2 */ op(RET, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        /* 3 */ op(LD_W_ABS, 0, 0, NR),
        /* 4 */ op(JGE, 11, 0, x32), // 16
        /* 5 */ op(JEQ, 9, 0, calls.connect), // 15
        /* 6 */ op(JEQ, 1, 0, calls.socket), // 8
        /* 7 */ op(JEQ, 0, 6, calls.socketpair), // 8, else 14
        /* 8 */ op(LD_W_ABS, 0, 0, ARG0),
        /* 9 */ op(JEQ, 0, 7, unix), // 10, else 17
        /* 10 */ op(LD_W_ABS, 0, 0, ARG1),
        /* 11 */ op(AND, 0, 0, 0xf),
        /* 12 */ op(JEQ, 5, 0, libc::SOCK_DGRAM.unsigned_abs()), // 18
        /* 13 */ op(JEQ, 4, 0, libc::SOCK_RAW.unsigned_abs()), // 18, else 14
        /* 14 */ op(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
        /* 15 */ op(RET, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        /* 16 */ op(RET, 0, 0, errno(libc::ENOSYS)),
        /* 17 */ op(RET, 0, 0, errno(libc::EAFNOSUPPORT)),
        /* 18 */ op(RET, 0, 0, errno(libc::EACCES)),
    ]
}

/// As [`unix_only`], with two more families let through at 10 and 11.
fn with_ip(arch: u32, x32: u32, calls: &Calls) -> Program {
    let unix = libc::AF_UNIX.unsigned_abs();
    vec![
        /* 0 */ op(LD_W_ABS, 0, 0, ARCH),
        /* 1 */ op(JEQ, 1, 0, arch), // 3, else 2
        /* 2 */ op(RET, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        /* 3 */ op(LD_W_ABS, 0, 0, NR),
        /* 4 */ op(JGE, 13, 0, x32), // 18
        /* 5 */ op(JEQ, 11, 0, calls.connect), // 17
        /* 6 */ op(JEQ, 1, 0, calls.socket), // 8
        /* 7 */ op(JEQ, 0, 8, calls.socketpair), // 8, else 16
        /* 8 */ op(LD_W_ABS, 0, 0, ARG0),
        /* 9 */ op(JEQ, 2, 0, unix), // 12, else 10
        /* 10 */ op(JEQ, 5, 0, libc::AF_INET.unsigned_abs()), // 16, else 11
        /* 11 */ op(JEQ, 4, 7, libc::AF_INET6.unsigned_abs()), // 16, else 19
        /* 12 */ op(LD_W_ABS, 0, 0, ARG1),
        /* 13 */ op(AND, 0, 0, 0xf),
        /* 14 */ op(JEQ, 5, 0, libc::SOCK_DGRAM.unsigned_abs()), // 20
        /* 15 */ op(JEQ, 4, 0, libc::SOCK_RAW.unsigned_abs()), // 20, else 16
        /* 16 */ op(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
        /* 17 */ op(RET, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        /* 18 */ op(RET, 0, 0, errno(libc::ENOSYS)),
        /* 19 */ op(RET, 0, 0, errno(libc::EAFNOSUPPORT)),
        /* 20 */ op(RET, 0, 0, errno(libc::EACCES)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call as the filter sees it.
    #[derive(Clone, Copy)]
    struct Call {
        nr: u32,
        arch: u32,
        args: [u64; 2],
    }

    /// Runs `program` as the kernel would on `call`: the few instructions
    /// the gate uses, nothing more.
    fn run(program: &Program, call: Call) -> u32 {
        let low = |v: u64| (v & 0xffff_ffff) as u32;
        let data = |offset: u32| match offset {
            NR => call.nr,
            ARCH => call.arch,
            ARG0 => low(call.args[0]),
            ARG1 => low(call.args[1]),
            other => panic!("unexpected load at {other}"),
        };
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let ins = &program[pc];
            pc += 1;
            match ins.code {
                LD_W_ABS => acc = data(ins.k),
                AND => acc &= ins.k,
                JEQ => pc += usize::from(if acc == ins.k { ins.jt } else { ins.jf }),
                JGE => pc += usize::from(if acc >= ins.k { ins.jt } else { ins.jf }),
                RET => return ins.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_gate_decides_as_network_false_wants() {
        for ip in [false, true] {
            decides_as_wanted(&gate(ip).unwrap(), ip);
        }
    }

    /// `ip`: the egress variant, where IP sockets open.
    #[cfg(target_arch = "x86_64")]
    fn decides_as_wanted(program: &Program, ip: bool) {
        let x86_64 = AUDIT_ARCH.unwrap();
        let nr = |n: i64| u32::try_from(n).unwrap();
        let call = |n: i64, args: [i32; 2]| Call {
            nr: nr(n),
            arch: x86_64,
            args: args.map(|a| u64::from(a.unsigned_abs())),
        };
        let check = |c: Call, want: u32, what: &str| assert_eq!(run(program, c), want, "{what}, ip={ip}");
        let (allow, notify) = (libc::SECCOMP_RET_ALLOW, libc::SECCOMP_RET_USER_NOTIF);
        check(call(libc::SYS_connect, [3, 0]), notify, "connect");
        for other in [
            libc::SYS_sendmsg,
            libc::SYS_sendto,
            libc::SYS_bind,
            libc::SYS_read,
        ] {
            check(call(other, [libc::AF_INET, 0]), allow, "another call");
        }
        let (unix, stream, dgram) = (libc::AF_UNIX, libc::SOCK_STREAM, libc::SOCK_DGRAM);
        let flags = libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        for creates in [libc::SYS_socket, libc::SYS_socketpair] {
            check(call(creates, [unix, stream | flags]), allow, "unix stream");
            check(
                call(creates, [unix, libc::SOCK_SEQPACKET]),
                allow,
                "unix seqpacket",
            );
            check(
                call(creates, [unix, dgram | flags]),
                errno(libc::EACCES),
                "unix datagram",
            );
            check(
                call(creates, [unix, libc::SOCK_RAW]),
                errno(libc::EACCES),
                "unix raw",
            );
            for family in [libc::AF_INET, libc::AF_INET6] {
                let want = if ip { allow } else { errno(libc::EAFNOSUPPORT) };
                check(call(creates, [family, stream]), want, "IP stream");
                check(call(creates, [family, dgram]), want, "IP datagram");
            }
            for family in [libc::AF_NETLINK, libc::AF_PACKET, 40] {
                check(
                    call(creates, [family, stream]),
                    errno(libc::EAFNOSUPPORT),
                    "a family",
                );
            }
        }
        // High bits of the family do not hide it: the kernel reads an int.
        let high = Call {
            args: [(1 << 32) | u64::from(libc::AF_UNIX.unsigned_abs()), 2],
            ..call(libc::SYS_socket, [0, 0])
        };
        check(high, errno(libc::EACCES), "a family with high bits");
        // x32's connect and socket, and any other x32 call.
        let x32 = |n: u32| Call {
            nr: X32_BIT | n,
            ..call(0, [0, 0])
        };
        check(x32(42), errno(libc::ENOSYS), "x32 connect");
        check(x32(41), errno(libc::ENOSYS), "x32 socket");
        check(x32(0), errno(libc::ENOSYS), "x32 read");
        // i386's socketcall (102) and connect (362), through int 0x80.
        for n in [102, 362] {
            let i386 = Call {
                arch: 0x4000_0003,
                ..call(n, [0, 0])
            };
            check(i386, libc::SECCOMP_RET_KILL_PROCESS, "i386");
        }
    }

    /// Every jump lands inside the program, and it ends in a return.
    #[test]
    fn every_jump_lands_inside() {
        for program in [gate(false), gate(true)].into_iter().flatten() {
            lands_inside(&program);
        }
    }

    fn lands_inside(program: &Program) {
        for (pc, ins) in program.iter().enumerate() {
            if ins.code == JEQ || ins.code == JGE {
                let furthest = pc + 1 + usize::from(ins.jt.max(ins.jf));
                assert!(furthest < program.len(), "instruction {pc} jumps out");
            }
        }
        assert_eq!(program.last().map(|i| i.code), Some(RET));
    }
}
