//! The seccomp filter both back ends install: the Landlock helper applies it to itself
//! before it executes the command; bubblewrap loads it from a pipe (`--seccomp FD`) and
//! applies it right before it executes the command.
//!
//! What it refuses (with `EPERM`):
//!
//! - `TIOCSTI` and `TIOCLINUX` ioctls (keys typed into a terminal outside the sandbox);
//! - without network ([`Sockets::OwnNamespace`] and [`Sockets::PairsOnly`]): every socket
//!   family but IPv4, IPv6 and netlink in the command's own network namespace (only its own
//!   loopback is there), and none at all without such a namespace; unix socket pairs only as
//!   streams or sequenced packets (a datagram pair could be addressed to any unix socket with
//!   a path, and a unix `SOCK_RAW` pair is a datagram pair); no io_uring (it makes sockets without the
//!   `socket` system call). So no unix socket with a path (`docker.sock`, D-Bus, an ssh
//!   agent, a socket in the workspace), no abstract unix socket, no `AF_VSOCK` to the
//!   hypervisor, whatever the filesystem shows;
//! - [`Rules::keyrings`] (both back ends): the kernel keyrings, which no namespace here
//!   separates (root's user keyring is the host's);
//! - for the Landlock helper and the persistent sandbox, [`Rules::foreign_processes`]:
//!   `ptrace`, `process_vm_*` and `pidfd_getfd` (another process's descriptors);
//!   [`Rules::root_metadata`]: a file's mode, times and extended
//!   attributes (which Landlock does not cover, and root owns every file);
//!   [`Rules::sysv_ipc`]: System V IPC and POSIX message queues, when no IPC namespace of
//!   its own could be made.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Which sockets a command may make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sockets {
    /// Any: the network is allowed.
    Any,
    /// IPv4, IPv6 and netlink sockets, in a network namespace of the command's own (its
    /// own loopback, nothing else), and unix stream socket pairs.
    OwnNamespace,
    /// Unix stream socket pairs only: no network namespace could be made.
    PairsOnly,
}

/// What one filter refuses beyond the terminal ioctls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    /// The sockets allowed.
    pub(crate) sockets: Sockets,
    /// Refuse `ptrace`, `process_vm_readv`/`writev` and `pidfd_getfd`.
    pub(crate) foreign_processes: bool,
    /// Refuse the keyring calls (`keyctl`, `add_key`, `request_key`).
    pub(crate) keyrings: bool,
    /// Refuse changing a file's mode, times and extended attributes (root under Landlock).
    pub(crate) root_metadata: bool,
    /// Refuse System V IPC and POSIX message queues (no IPC namespace of its own).
    pub(crate) sysv_ipc: bool,
}

/// `socketpair`'s type argument holds `SOCK_NONBLOCK` and `SOCK_CLOEXEC` above the type
/// itself (`linux/net.h`: `SOCK_TYPE_MASK`).
const SOCK_TYPE_MASK: u64 = 0xf;

/// The filter for `rules`, compiled for this machine's architecture.
pub(crate) fn program(rules: Rules) -> Result<BpfProgram, String> {
    let fail = |error: seccompiler::BackendError| format!("seccomp: {error}");
    let condition = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(fail)
    };
    let rule = |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions).map_err(fail);
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    #[allow(clippy::unnecessary_cast)] // the type of these constants differs between targets
    let ioctls = vec![
        rule(vec![condition(1, SeccompCmpOp::Eq, libc::TIOCSTI as u64)?])?,
        rule(vec![condition(
            1,
            SeccompCmpOp::Eq,
            libc::TIOCLINUX as u64,
        )?])?,
    ];
    refused.insert(libc::SYS_ioctl, ioctls);
    let socket = match rules.sockets {
        Sockets::Any => None,
        // Refused when the family is none of the three (the conditions of one rule all hold).
        Sockets::OwnNamespace => Some(vec![rule(vec![
            condition(0, SeccompCmpOp::Ne, libc::AF_INET as u64)?,
            condition(0, SeccompCmpOp::Ne, libc::AF_INET6 as u64)?,
            condition(0, SeccompCmpOp::Ne, libc::AF_NETLINK as u64)?,
        ])?]),
        // An empty rule list refuses the call whatever its arguments.
        Sockets::PairsOnly => Some(Vec::new()),
    };
    if let Some(socket) = socket {
        refused.insert(libc::SYS_socket, socket);
        // Pairs of another family, and unix pairs of any type but the two connection-based
        // ones: a datagram pair (and `SOCK_RAW`, which the kernel makes a datagram one in
        // `unix_create`) can be addressed to any unix socket with a path. Listed type by
        // type (seccompiler has no masked "not equal"); the type is four bits.
        let mut pairs = vec![rule(vec![condition(
            0,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?];
        for kind in 0..=SOCK_TYPE_MASK {
            #[allow(clippy::unnecessary_cast)]
            // the type of these constants differs between targets
            let allowed = kind == libc::SOCK_STREAM as u64 || kind == libc::SOCK_SEQPACKET as u64;
            if !allowed {
                pairs.push(rule(vec![condition(
                    1,
                    SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
                    kind,
                )?])?);
            }
        }
        refused.insert(libc::SYS_socketpair, pairs);
        refused.insert(libc::SYS_io_uring_setup, Vec::new());
    }
    if rules.foreign_processes {
        for call in [
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_pidfd_getfd,
        ] {
            refused.insert(call, Vec::new());
        }
    }
    if rules.keyrings {
        for call in [libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key] {
            refused.insert(call, Vec::new());
        }
    }
    if rules.root_metadata {
        for call in METADATA_CALLS {
            refused.insert(call, Vec::new());
        }
    }
    if rules.sysv_ipc {
        for call in IPC_CALLS {
            refused.insert(call, Vec::new());
        }
    }
    // On x86_64 a kernel built with x32 support takes the same calls with bit 30 set in
    // the number, under the same architecture value: refuse those numbers alike.
    #[cfg(target_arch = "x86_64")]
    {
        const X32_SYSCALL_BIT: i64 = 0x4000_0000;
        let x32: Vec<(i64, Vec<SeccompRule>)> = refused
            .iter()
            .map(|(call, rules)| (call | X32_SYSCALL_BIT, rules.clone()))
            .collect();
        refused.extend(x32);
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(fail)?;
    let filter = SeccompFilter::new(
        refused,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(fail)?;
    filter.try_into().map_err(fail)
}

/// Installs the filter for `rules` on this thread (and what it starts).
pub(crate) fn apply(rules: Rules) -> Result<(), String> {
    let program = program(rules)?;
    seccompiler::apply_filter(&program).map_err(|error| format!("seccomp: {error}"))
}

/// The program as the kernel's `struct sock_filter` array in this machine's byte order:
/// what bubblewrap's `--seccomp FD` reads.
pub(crate) fn to_bytes(program: &BpfProgram) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    bytes
}

/// System calls that change a file's mode, times or extended attributes.
#[cfg(target_arch = "x86_64")]
const METADATA_CALLS: [i64; 14] = [
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_futimesat,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
];
#[cfg(not(target_arch = "x86_64"))]
const METADATA_CALLS: [i64; 10] = [
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
];

/// System V shared memory, semaphores and message queues, and POSIX message queues: the
/// objects an IPC namespace separates.
const IPC_CALLS: [i64; 17] = [
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_getsetattr,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_set_compiles_and_serializes_whole() {
        for sockets in [Sockets::Any, Sockets::OwnNamespace, Sockets::PairsOnly] {
            for flags in 0..16u8 {
                let rules = Rules {
                    sockets,
                    foreign_processes: flags & 1 != 0,
                    root_metadata: flags & 2 != 0,
                    sysv_ipc: flags & 4 != 0,
                    keyrings: flags & 8 != 0,
                };
                let program = program(rules);
                assert!(program.is_ok(), "{rules:?}: {program:?}");
                let program = program.unwrap_or_default();
                assert_eq!(to_bytes(&program).len(), program.len() * 8);
            }
        }
    }
}
