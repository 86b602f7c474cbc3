//! The sandbox's system call filter: reviewable JSON in `seccomp/`, compiled to BPF.

use std::collections::HashMap;

use seccompiler::{BpfProgram, TargetArch};

/// The policy files, one per architecture.
const X86_64: &str = include_str!("../seccomp/x86_64.json");
const AARCH64: &str = include_str!("../seccomp/aarch64.json");

/// Filters of the policy file, chained into one program in this order: a call the first
/// one allows falls through to the next.
const FILTERS: [&str; 2] = ["eperm", "enosys"];

/// Why the policy could not be turned into BPF.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("no seccomp policy for architecture {0}")]
    UnsupportedArch(&'static str),
    #[error("seccomp policy for {arch} does not compile")]
    Compile {
        arch: &'static str,
        #[source]
        source: seccompiler::Error,
    },
    #[error("seccomp policy for {arch} lacks the filter {name:?}")]
    MissingFilter {
        arch: &'static str,
        name: &'static str,
    },
}

/// Compiles the policy for the running architecture into one program ready to install.
pub fn compile() -> Result<BpfProgram, SeccompError> {
    compile_for(std::env::consts::ARCH).map(chain)
}

/// Compiles each filter of the policy for `arch` (`x86_64` or `aarch64`).
pub fn compile_for(arch: &'static str) -> Result<Vec<BpfProgram>, SeccompError> {
    let (source, target) = match arch {
        "x86_64" => (X86_64, TargetArch::x86_64),
        "aarch64" => (AARCH64, TargetArch::aarch64),
        other => return Err(SeccompError::UnsupportedArch(other)),
    };
    let mut compiled: HashMap<String, BpfProgram> =
        seccompiler::compile_from_json(source.as_bytes(), target)
            .map_err(|source| SeccompError::Compile { arch, source })?;
    let mut programs = Vec::with_capacity(FILTERS.len());
    for name in FILTERS {
        let mut program = compiled
            .remove(name)
            .ok_or(SeccompError::MissingFilter { arch, name })?;
        if arch == "x86_64" {
            refuse_x32(&mut program);
        }
        programs.push(program);
    }
    Ok(programs)
}

/// Joins programs into one by turning every "allow" of a program into a jump to the start of
/// the next. One program costs the kernel one verification and JIT instead of several, and
/// its answers are those the separate filters would give.
fn chain(programs: Vec<BpfProgram>) -> BpfProgram {
    let mut chained: BpfProgram = Vec::new();
    let count = programs.len();
    for (index, mut program) in programs.into_iter().enumerate() {
        if index + 1 < count {
            let len = program.len();
            for (at, instruction) in program.iter_mut().enumerate() {
                let returns_allow = u32::from(instruction.code) == (libc::BPF_RET | libc::BPF_K)
                    && instruction.k == libc::SECCOMP_RET_ALLOW;
                if returns_allow {
                    *instruction = bpf(
                        libc::BPF_JMP | libc::BPF_JA,
                        0,
                        0,
                        u32::try_from(len - at - 1).unwrap_or(0),
                    );
                }
            }
        }
        chained.extend(program);
    }
    chained
}

/// x32-ABI system calls arrive with the x86-64 audit architecture and their number offset
/// by `__X32_SYSCALL_BIT`, so a filter keyed on x86-64 numbers would not see them. This
/// inserts, right after seccompiler's architecture check, a test that answers every such
/// call with `ENOSYS`.
fn refuse_x32(program: &mut BpfProgram) {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const ARCH_CHECK_LEN: usize = 3;
    let guard = [
        // A = seccomp_data.nr
        bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        // if A >= X32_SYSCALL_BIT: fall through to the return, else skip it
        bpf(
            libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
            0,
            1,
            X32_SYSCALL_BIT,
        ),
        bpf(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS.cast_unsigned(),
        ),
    ];
    let at = ARCH_CHECK_LEN.min(program.len());
    program.splice(at..at, guard);
}

fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter {
        code: u16::try_from(code).unwrap_or(u16::MAX),
        jt,
        jf,
        k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_compile_for_every_architecture() {
        for arch in ["x86_64", "aarch64"] {
            let programs = compile_for(arch).unwrap();
            assert_eq!(programs.len(), FILTERS.len(), "{arch}");
            assert!(programs.iter().all(|p| p.len() > 3), "{arch}");
        }
    }

    #[test]
    fn chained_programs_fall_through_instead_of_allowing() {
        let programs = compile_for("x86_64").unwrap();
        let (first, second) = (&programs[0], &programs[1]);
        let returns_allow = |i: &seccompiler::sock_filter| {
            i.k == libc::SECCOMP_RET_ALLOW && u32::from(i.code) == libc::BPF_RET | libc::BPF_K
        };
        let allows: Vec<usize> = (0..first.len())
            .filter(|&at| returns_allow(&first[at]))
            .collect();
        assert!(!allows.is_empty());
        let chained = chain(programs.clone());
        assert_eq!(chained.len(), first.len() + second.len());
        for (at, instruction) in chained[..first.len()].iter().enumerate() {
            if allows.contains(&at) {
                // Every former "allow" jumps to the first instruction of the next program.
                assert_eq!(u32::from(instruction.code), libc::BPF_JMP | libc::BPF_JA);
                assert_eq!(at + 1 + instruction.k as usize, first.len());
            } else {
                assert_eq!(
                    (instruction.code, instruction.k),
                    (first[at].code, first[at].k)
                );
            }
        }
        assert_eq!(&chained[first.len()..], second.as_slice());
    }

    #[test]
    fn the_x32_guard_follows_the_architecture_check() {
        let program = &compile_for("x86_64").unwrap()[0];
        // seccompiler's check: load arch, compare, kill on mismatch.
        assert_eq!(program[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(program[4].k, 0x4000_0000);
        assert_eq!(program[5].k, libc::SECCOMP_RET_ERRNO | 0x26);
    }
}
