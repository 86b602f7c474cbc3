//! The sandbox's system call filter: reviewable JSON in `seccomp/`, compiled to BPF.
//!
//! The policy files use seccompiler's JSON format, but the program installed is built here,
//! as a binary search tree over system call numbers rather than seccompiler's linear chain
//! of comparisons. Since Linux 5.11 the kernel, when a filter is attached, runs the filter
//! once per system call number to find the calls it always allows; over a chain of ~100
//! comparisons that emulation made the attach the single most expensive step of sandbox
//! setup. Over a tree each emulated (and each real) call takes a handful of steps.
//!
//! Only the subset of the format the policy files use is understood; anything else is an
//! error rather than something silently left out of the filter.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;

use seccompiler::{BpfProgram, sock_filter};
use serde::Deserialize;

/// The policy files, one per architecture.
const X86_64: &str = include_str!("../seccomp/x86_64.json");
const AARCH64: &str = include_str!("../seccomp/aarch64.json");

/// Filters of the policy file, in the order they decide: a call the first one does not
/// match is up to the next, and one no filter matches is allowed.
const FILTERS: [&str; 2] = ["eperm", "enosys"];

/// `AUDIT_ARCH_*` values the kernel reports in `seccomp_data.arch`.
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;

/// x32-ABI calls arrive with the x86-64 audit architecture and this bit set in their number,
/// so a tree keyed on x86-64 numbers would wrongly allow them.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Offsets in `struct seccomp_data`: `nr`, `arch`, then `args[6]` as 64-bit words (both
/// supported architectures are little-endian, so an argument's low word comes first).
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
const ARGS_OFFSET: u32 = 16;

/// How far a conditional jump reaches: its offsets are 8 bits.
const MAX_JUMP: usize = 255;

/// Why the policy could not be turned into BPF.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("no seccomp policy for architecture {0}")]
    UnsupportedArch(&'static str),
    #[error("seccomp policy for {arch} is not in the supported json format")]
    Parse {
        arch: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("seccomp policy for {arch} lacks the filter {name:?}")]
    MissingFilter {
        arch: &'static str,
        name: &'static str,
    },
    #[error("seccomp policy for {arch} has the filter {name:?}, which is not one of {FILTERS:?}")]
    UnknownFilter { arch: &'static str, name: String },
    #[error("seccomp policy for {arch} names the system call {name:?}, unknown on {arch}")]
    UnknownSyscall { arch: &'static str, name: String },
    #[error("seccomp policy for {arch} uses {what}, which the compiler does not support")]
    Unsupported { arch: &'static str, what: String },
    #[error(
        "seccomp policy for {arch} compares {syscall} argument {index} with mask {mask:#x} and value {value:#x}, which reach beyond the low 32 bits"
    )]
    HighWord {
        arch: &'static str,
        syscall: String,
        index: u8,
        mask: u64,
        value: u64,
    },
}

/// Compiles the policy for the running architecture into one program ready to install.
pub fn compile() -> Result<BpfProgram, SeccompError> {
    compile_for(std::env::consts::ARCH)
}

/// Compiles the policy for `arch` (`x86_64` or `aarch64`).
pub fn compile_for(arch: &'static str) -> Result<BpfProgram, SeccompError> {
    match arch {
        "x86_64" => compile_source(arch, X86_64),
        "aarch64" => compile_source(arch, AARCH64),
        other => Err(SeccompError::UnsupportedArch(other)),
    }
}

/// Compiles one policy file's text for `arch`.
fn compile_source(arch: &'static str, source: &str) -> Result<BpfProgram, SeccompError> {
    let audit_arch = match arch {
        "x86_64" => AUDIT_ARCH_X86_64,
        "aarch64" => AUDIT_ARCH_AARCH64,
        other => return Err(SeccompError::UnsupportedArch(other)),
    };
    let files: BTreeMap<String, JsonFilter> =
        serde_json::from_str(source).map_err(|source| SeccompError::Parse { arch, source })?;
    let policy = Policy::from_json(arch, files)?;
    Ok(emit(&policy, audit_arch, arch == "x86_64"))
}

// The JSON format, as far as the policy files use it. Unknown fields are refused by serde;
// values the format allows but the compiler does not support are refused in `Policy`.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonFilter {
    mismatch_action: serde_json::Value,
    match_action: serde_json::Value,
    filter: Vec<JsonRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRule {
    syscall: String,
    args: Option<Vec<JsonCondition>>,
    #[expect(
        dead_code,
        reason = "comments are for reviewers; serde only has to accept them"
    )]
    comment: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonCondition {
    index: u8,
    #[serde(rename = "type")]
    kind: String,
    op: serde_json::Value,
    val: u64,
    #[expect(
        dead_code,
        reason = "comments are for reviewers; serde only has to accept them"
    )]
    comment: Option<String>,
}

/// `(seccomp_data.args[index] & mask) == value`, on the argument's low 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Condition {
    index: u8,
    mask: u32,
    value: u32,
}

/// What one filter says about one system call: `action` if any rule holds, where a rule
/// holds if all its conditions do (a rule without conditions always holds).
#[derive(Debug)]
struct Match {
    action: u32,
    rules: Vec<Vec<Condition>>,
}

/// The policy keyed by system call number; each entry lists the matches of the filters
/// that name the call, in `FILTERS` order.
#[derive(Debug)]
struct Policy {
    calls: BTreeMap<u32, Vec<Match>>,
}

impl Policy {
    fn from_json(
        arch: &'static str,
        mut files: BTreeMap<String, JsonFilter>,
    ) -> Result<Self, SeccompError> {
        let unsupported = |what: String| SeccompError::Unsupported { arch, what };
        if let Some(name) = files.keys().find(|name| !FILTERS.contains(&name.as_str())) {
            return Err(SeccompError::UnknownFilter {
                arch,
                name: name.clone(),
            });
        }
        let mut calls: BTreeMap<u32, Vec<Match>> = BTreeMap::new();
        for name in FILTERS {
            let filter = files
                .remove(name)
                .ok_or(SeccompError::MissingFilter { arch, name })?;
            if filter.mismatch_action != "allow" {
                return Err(unsupported(format!(
                    "the mismatch_action {} of filter {name:?}",
                    filter.mismatch_action
                )));
            }
            let action = errno_action(&filter.match_action).ok_or_else(|| {
                unsupported(format!(
                    "the match_action {} of filter {name:?}",
                    filter.match_action
                ))
            })?;
            // Rules of one filter for one call, gathered so that the filter's later rules
            // for a call add to (OR) its earlier ones.
            let mut rules: BTreeMap<u32, Vec<Vec<Condition>>> = BTreeMap::new();
            for rule in filter.filter {
                let nr = syscall_number(arch, &rule.syscall).ok_or_else(|| {
                    SeccompError::UnknownSyscall {
                        arch,
                        name: rule.syscall.clone(),
                    }
                })?;
                let conditions = match rule.args {
                    None => Vec::new(),
                    Some(args) if args.is_empty() => {
                        return Err(unsupported(format!(
                            "an empty args list for {}",
                            rule.syscall
                        )));
                    }
                    Some(args) => args
                        .iter()
                        .map(|arg| condition(arch, &rule.syscall, arg))
                        .collect::<Result<_, _>>()?,
                };
                rules.entry(nr).or_default().push(conditions);
            }
            for (nr, rules) in rules {
                calls.entry(nr).or_default().push(Match { action, rules });
            }
        }
        Ok(Self { calls })
    }
}

/// `{"errno": n}` as a seccomp return value.
fn errno_action(action: &serde_json::Value) -> Option<u32> {
    let object = action.as_object()?;
    if object.len() != 1 {
        return None;
    }
    let errno = u32::try_from(object.get("errno")?.as_u64()?).ok()?;
    (errno <= libc::SECCOMP_RET_DATA).then_some(libc::SECCOMP_RET_ERRNO | errno)
}

fn condition(
    arch: &'static str,
    syscall: &str,
    arg: &JsonCondition,
) -> Result<Condition, SeccompError> {
    let unsupported = |what: String| SeccompError::Unsupported { arch, what };
    if arg.index > 5 {
        return Err(unsupported(format!(
            "argument index {} for {syscall}",
            arg.index
        )));
    }
    if arg.kind != "qword" {
        return Err(unsupported(format!(
            "the argument type {:?} for {syscall}",
            arg.kind
        )));
    }
    let mask = arg
        .op
        .as_object()
        .filter(|op| op.len() == 1)
        .and_then(|op| op.get("masked_eq"))
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| unsupported(format!("the op {} for {syscall}", arg.op)))?;
    // A qword comparison also checks the high word; with mask and value both within the low
    // word that check always passes, so the low word decides alone.
    match (u32::try_from(mask), u32::try_from(arg.val)) {
        (Ok(mask), Ok(value)) => Ok(Condition {
            index: arg.index,
            mask,
            value,
        }),
        _ => Err(SeccompError::HighWord {
            arch,
            syscall: syscall.to_owned(),
            index: arg.index,
            mask,
            value: arg.val,
        }),
    }
}

fn syscall_number(arch: &str, name: &str) -> Option<u32> {
    let id = match arch {
        "x86_64" => syscalls::x86_64::Sysno::from_str(name).ok()?.id(),
        "aarch64" => syscalls::aarch64::Sysno::from_str(name).ok()?.id(),
        _ => return None,
    };
    u32::try_from(id).ok()
}

/// Where a jump goes: a return of a value, or an instruction already emitted.
#[derive(Debug, Clone, Copy)]
enum Target {
    Return(u32),
    At(Label),
}

/// An instruction's place counted from the end of the program. The program is emitted
/// back to front, so every forward jump's destination exists before the jump does.
type Label = usize;

#[derive(Debug, Default)]
struct Emitter {
    reversed: Vec<sock_filter>,
    /// The last emitted return of each value, for jumps to share.
    returns: HashMap<u32, Label>,
}

impl Emitter {
    fn push(&mut self, code: u32, jt: u8, jf: u8, k: u32) -> Label {
        self.reversed.push(bpf(code, jt, jf, k));
        self.reversed.len() - 1
    }

    /// Distance from the next instruction to be emitted to `label`.
    fn offset(&self, label: Label) -> usize {
        self.reversed.len() - label - 1
    }

    /// A label within reach of a conditional jump emitted after at most one more instruction
    /// (the jump's other target may need one): a shared return if one is close enough, else
    /// a fresh return or a `JA` trampoline, whose offset is 32 bits.
    fn reach(&mut self, target: Target) -> Label {
        let near = |emitter: &Self, label: Label| emitter.offset(label) < MAX_JUMP;
        match target {
            Target::Return(value) => match self.returns.get(&value) {
                Some(&label) if near(self, label) => label,
                _ => {
                    let label = self.push(libc::BPF_RET | libc::BPF_K, 0, 0, value);
                    self.returns.insert(value, label);
                    label
                }
            },
            Target::At(label) if near(self, label) => label,
            Target::At(label) => {
                let k = u32::try_from(self.offset(label)).unwrap_or(u32::MAX);
                self.push(libc::BPF_JMP | libc::BPF_JA, 0, 0, k)
            }
        }
    }

    /// `if A <op> k goto jt else goto jf`.
    fn jump(&mut self, op: u32, k: u32, jt: Target, jf: Target) -> Label {
        let jt = self.reach(jt);
        let jf = self.reach(jf);
        // `reach` left both within 255 of this jump, so the conversion cannot fail.
        let offset = |label| u8::try_from(self.offset(label)).unwrap_or(u8::MAX);
        let (jt, jf) = (offset(jt), offset(jf));
        self.push(libc::BPF_JMP | op | libc::BPF_K, jt, jf, k)
    }

    /// Makes the instruction emitted next continue at `target`: by falling through when
    /// that is the instruction right after it, else by a jump or return of its own.
    fn fall_to(&mut self, target: Target) {
        match target {
            Target::At(label) if self.offset(label) == 0 => {}
            Target::At(label) => {
                let k = u32::try_from(self.offset(label)).unwrap_or(u32::MAX);
                self.push(libc::BPF_JMP | libc::BPF_JA, 0, 0, k);
            }
            Target::Return(value) => {
                self.push(libc::BPF_RET | libc::BPF_K, 0, 0, value);
            }
        }
    }

    /// `A = seccomp_data[offset]` (32 bits).
    fn load(&mut self, offset: u32) -> Label {
        self.push(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, offset)
    }

    /// The search tree over `calls` (sorted by number): each inner node splits the range
    /// with `JGE`, each leaf tests its one number with `JEQ`; numbers not in `calls` are
    /// allowed.
    fn tree(&mut self, calls: &[(u32, &[Match])]) -> Target {
        match calls {
            [] => Target::Return(libc::SECCOMP_RET_ALLOW),
            [(nr, matches)] => {
                let leaf = self.leaf(matches);
                let test = self.jump(
                    libc::BPF_JEQ,
                    *nr,
                    leaf,
                    Target::Return(libc::SECCOMP_RET_ALLOW),
                );
                Target::At(test)
            }
            _ => {
                let (low, high) = calls.split_at(calls.len() / 2);
                // Emitted back to front: the lower half ends up right after the split, so
                // the fall-through branch needs no jump.
                let above = self.tree(high);
                let below = self.tree(low);
                Target::At(self.jump(libc::BPF_JGE, high[0].0, above, below))
            }
        }
    }

    /// The filters' answers for one call, tried in order; none matching allows it.
    fn leaf(&mut self, matches: &[Match]) -> Target {
        let mut next = Target::Return(libc::SECCOMP_RET_ALLOW);
        for found in matches.iter().rev() {
            next = self.filter_match(found, next);
        }
        next
    }

    fn filter_match(&mut self, found: &Match, otherwise: Target) -> Target {
        let action = Target::Return(found.action);
        if found.rules.iter().any(Vec::is_empty) {
            return action;
        }
        // The common shape (clone and unshare with each `CLONE_NEW*` flag): rules of one
        // condition each, all on the same argument, each testing that one bit is set. Their
        // OR is "any of these bits is set", a single `JSET`.
        let single_bits = found.rules.iter().all(|rule| {
            let [condition] = rule.as_slice() else {
                return false;
            };
            condition.index == found.rules[0][0].index
                && condition.mask == condition.value
                && condition.mask.is_power_of_two()
        });
        if single_bits {
            let bits = found.rules.iter().fold(0, |bits, rule| bits | rule[0].mask);
            self.jump(libc::BPF_JSET, bits, action, otherwise);
            return Target::At(self.load(arg_offset(found.rules[0][0].index)));
        }
        // Any other shape: each rule as a run of `(arg & mask) == value` tests, a failed test
        // moving on to the next rule.
        let mut next_rule = otherwise;
        for rule in found.rules.iter().rev() {
            let mut on_match = action;
            for condition in rule.iter().rev() {
                self.jump(libc::BPF_JEQ, condition.value, on_match, next_rule);
                self.push(
                    libc::BPF_ALU | libc::BPF_AND | libc::BPF_K,
                    0,
                    0,
                    condition.mask,
                );
                on_match = Target::At(self.load(arg_offset(condition.index)));
            }
            next_rule = on_match;
        }
        next_rule
    }

    fn into_program(self) -> BpfProgram {
        let mut program = self.reversed;
        program.reverse();
        program
    }
}

fn arg_offset(index: u8) -> u32 {
    ARGS_OFFSET + 8 * u32::from(index)
}

/// The whole program: architecture check, the x32 guard on x86-64, then the tree.
fn emit(policy: &Policy, audit_arch: u32, refuse_x32: bool) -> BpfProgram {
    let mut emitter = Emitter::default();
    let calls: Vec<(u32, &[Match])> = policy
        .calls
        .iter()
        .map(|(nr, matches)| (*nr, matches.as_slice()))
        .collect();
    let mut start = emitter.tree(&calls);
    if refuse_x32 {
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS.cast_unsigned();
        start = Target::At(emitter.jump(
            libc::BPF_JGE,
            X32_SYSCALL_BIT,
            Target::Return(enosys),
            start,
        ));
    }
    emitter.fall_to(start);
    let nr = emitter.load(NR_OFFSET);
    // A foreign architecture (such as `int 0x80` on x86-64) has other numbers: kill it.
    emitter.jump(
        libc::BPF_JEQ,
        audit_arch,
        Target::At(nr),
        Target::Return(libc::SECCOMP_RET_KILL_PROCESS),
    );
    emitter.load(ARCH_OFFSET);
    emitter.into_program()
}

fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter {
        code: u16::try_from(code).unwrap_or(u16::MAX),
        jt,
        jf,
        k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLONE_NEW: [(&str, u64); 8] = [
        ("CLONE_NEWNS", 0x0002_0000),
        ("CLONE_NEWCGROUP", 0x0200_0000),
        ("CLONE_NEWUTS", 0x0400_0000),
        ("CLONE_NEWIPC", 0x0800_0000),
        ("CLONE_NEWUSER", 0x1000_0000),
        ("CLONE_NEWPID", 0x2000_0000),
        ("CLONE_NEWNET", 0x4000_0000),
        ("CLONE_NEWTIME", 0x80),
    ];
    const CLONE_VM: u64 = 0x100;
    const CLONE_FS: u64 = 0x200;
    const CLONE_THREAD: u64 = 0x1_0000;
    const SIGCHLD: u64 = 17;
    const AUDIT_ARCH_I386: u32 = 0x4000_0003;
    const ARCHES: [&str; 2] = ["x86_64", "aarch64"];

    /// The program seccompiler makes of the same files: each filter compiled on its own, the
    /// x32 guard spliced into each, the filters chained. This was the installed program
    /// before the tree; the tree must answer exactly as it does.
    fn reference(arch: &'static str) -> BpfProgram {
        let source = match arch {
            "x86_64" => X86_64,
            _ => AARCH64,
        };
        reference_of(arch, source)
    }

    /// [`reference`] for any policy text.
    fn reference_of(arch: &'static str, source: &str) -> BpfProgram {
        let target = match arch {
            "x86_64" => seccompiler::TargetArch::x86_64,
            _ => seccompiler::TargetArch::aarch64,
        };
        let mut compiled = seccompiler::compile_from_json(source.as_bytes(), target).unwrap();
        let programs = FILTERS
            .iter()
            .map(|name| {
                let mut program = compiled.remove(*name).unwrap();
                if arch == "x86_64" {
                    refuse_x32(&mut program);
                }
                program
            })
            .collect();
        chain(programs)
    }

    /// Joins programs into one by turning every "allow" of a program into a jump to the
    /// start of the next.
    fn chain(programs: Vec<BpfProgram>) -> BpfProgram {
        let mut chained: BpfProgram = Vec::new();
        let count = programs.len();
        for (index, mut program) in programs.into_iter().enumerate() {
            if index + 1 < count {
                let len = program.len();
                for (at, instruction) in program.iter_mut().enumerate() {
                    let returns_allow = u32::from(instruction.code)
                        == (libc::BPF_RET | libc::BPF_K)
                        && instruction.k == libc::SECCOMP_RET_ALLOW;
                    if returns_allow {
                        *instruction = bpf(
                            libc::BPF_JMP | libc::BPF_JA,
                            0,
                            0,
                            u32::try_from(len - at - 1).unwrap(),
                        );
                    }
                }
            }
            chained.extend(program);
        }
        chained
    }

    /// Inserts, right after seccompiler's architecture check, a test that answers every
    /// x32 call with `ENOSYS`.
    fn refuse_x32(program: &mut BpfProgram) {
        const ARCH_CHECK_LEN: usize = 3;
        let guard = [
            bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, NR_OFFSET),
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
        program.splice(ARCH_CHECK_LEN..ARCH_CHECK_LEN, guard);
    }

    /// The input of a filter: `struct seccomp_data`.
    #[derive(Debug, Clone, Copy)]
    struct Call {
        nr: u32,
        arch: u32,
        arg0: u64,
        arg1: u64,
    }

    impl Call {
        fn bytes(self) -> [u8; 64] {
            let mut data = [0; 64];
            data[0..4].copy_from_slice(&self.nr.to_le_bytes());
            data[4..8].copy_from_slice(&self.arch.to_le_bytes());
            data[16..24].copy_from_slice(&self.arg0.to_le_bytes());
            data[24..32].copy_from_slice(&self.arg1.to_le_bytes());
            data
        }
    }

    /// Runs a classic BPF program over `call` the way the kernel would, knowing just the
    /// instructions the two compilers emit. Returns the action and how many instructions
    /// ran.
    fn run(program: &[sock_filter], call: Call) -> (u32, usize) {
        let data = call.bytes();
        let mut a: u32 = 0;
        let mut pc = 0;
        let mut steps = 0;
        loop {
            let instruction = &program[pc];
            steps += 1;
            pc += 1;
            let k = instruction.k;
            let jump = |taken: bool| {
                usize::from(if taken {
                    instruction.jt
                } else {
                    instruction.jf
                })
            };
            match u32::from(instruction.code) {
                code if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    let at = k as usize;
                    assert!(at.is_multiple_of(4) && at + 4 <= data.len(), "load at {at}");
                    a = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                }
                code if code == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= k,
                code if code == libc::BPF_JMP | libc::BPF_JA => pc += k as usize,
                code if code == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => pc += jump(a == k),
                code if code == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => pc += jump(a >= k),
                code if code == libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K => pc += jump(a > k),
                code if code == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => {
                    pc += jump(a & k != 0);
                }
                code if code == libc::BPF_RET | libc::BPF_K => return (k, steps),
                code => panic!("instruction {code:#x} at {}", pc - 1),
            }
        }
    }

    fn audit_arch(arch: &str) -> u32 {
        if arch == "x86_64" {
            AUDIT_ARCH_X86_64
        } else {
            AUDIT_ARCH_AARCH64
        }
    }

    /// Every call the equivalence test puts to both programs for `arch`.
    fn calls(arch: &str) -> Vec<Call> {
        let all_new = CLONE_NEW.iter().fold(0, |all, (_, flag)| all | flag);
        let mut args = vec![
            0,
            all_new,
            CLONE_VM | CLONE_FS | SIGCHLD,
            CLONE_THREAD,
            CLONE_VM | CLONE_FS | CLONE_THREAD | SIGCHLD,
            1 << 32,
            0xFFFF_FFFF_0000_0000,
            0xFFFF_FFFF_0000_0000 | CLONE_VM | SIGCHLD,
            0x0002_0000_0000_0000 | 0x0002_0000,
            u64::MAX,
        ];
        args.extend(CLONE_NEW.iter().map(|(_, flag)| flag));
        args.extend(CLONE_NEW.iter().map(|(_, flag)| flag << 32));
        let native = audit_arch(arch);
        let foreign = [
            AUDIT_ARCH_I386,
            audit_arch(if arch == "x86_64" {
                "aarch64"
            } else {
                "x86_64"
            }),
        ];
        let mut calls = Vec::new();
        for nr in 0..=1100 {
            for &arg0 in &args {
                calls.push(Call {
                    nr,
                    arch: native,
                    arg0,
                    arg1: 0,
                });
            }
            for arg0 in [0, all_new, CLONE_VM | SIGCHLD] {
                calls.push(Call {
                    nr: nr | X32_SYSCALL_BIT,
                    arch: native,
                    arg0,
                    arg1: 0,
                });
                for arch in foreign {
                    calls.push(Call {
                        nr,
                        arch,
                        arg0,
                        arg1: 0,
                    });
                }
            }
        }
        for nr in [0x3FFF_FFFF, 0x8000_0000, u32::MAX] {
            calls.push(Call {
                nr,
                arch: native,
                arg0: all_new,
                arg1: 0,
            });
        }
        calls
    }

    #[test]
    fn the_tree_answers_as_the_chained_reference() {
        for arch in ARCHES {
            let tree = compile_for(arch).unwrap();
            let chained = reference(arch);
            let answers = |program: &[sock_filter]| -> Vec<(u32, u32, u64, u32)> {
                calls(arch)
                    .into_iter()
                    .map(|call| (call.nr, call.arch, call.arg0, run(program, call).0))
                    .collect()
            };
            let expected = answers(&chained);
            // The reference must deny something, or the comparison proves nothing.
            assert!(
                expected
                    .iter()
                    .any(|answer| answer.3 != libc::SECCOMP_RET_ALLOW)
            );
            assert_eq!(answers(&tree), expected, "{arch}");
        }
    }

    #[test]
    fn clone_and_unshare_are_denied_for_each_new_namespace_only() {
        let tree = compile_for("x86_64").unwrap();
        let eperm = libc::SECCOMP_RET_ERRNO | 1;
        let allow = libc::SECCOMP_RET_ALLOW;
        let answer = |nr: i64, arg0| {
            let nr = u32::try_from(nr).unwrap();
            run(
                &tree,
                Call {
                    nr,
                    arch: AUDIT_ARCH_X86_64,
                    arg0,
                    arg1: 0,
                },
            )
            .0
        };
        for nr in [libc::SYS_clone, libc::SYS_unshare] {
            let denied: Vec<(&str, u32)> = CLONE_NEW
                .iter()
                .map(|(name, flag)| (*name, answer(nr, *flag | CLONE_VM)))
                .collect();
            let expected: Vec<(&str, u32)> =
                CLONE_NEW.iter().map(|(name, _)| (*name, eperm)).collect();
            assert_eq!(denied, expected);
            assert_eq!(
                [
                    answer(nr, 0),
                    answer(nr, CLONE_VM | CLONE_FS | SIGCHLD),
                    answer(nr, 0x0002_0000 << 32)
                ],
                [allow; 3]
            );
        }
    }

    #[test]
    fn the_tree_is_shallow_and_small() {
        for arch in ARCHES {
            let tree = compile_for(arch).unwrap();
            let reference = reference(arch);
            let source = if arch == "x86_64" { X86_64 } else { AARCH64 };
            let files: BTreeMap<String, JsonFilter> = serde_json::from_str(source).unwrap();
            let policy = Policy::from_json(arch, files).unwrap();
            let numbers = policy.calls.len();
            let with_args: Vec<u32> = policy
                .calls
                .iter()
                .filter(|(_, matches)| {
                    matches
                        .iter()
                        .any(|m| m.rules.iter().any(|r| !r.is_empty()))
                })
                .map(|(nr, _)| *nr)
                .collect();
            let bound = 2 * numbers.ilog2() as usize + 8;
            let longest = (0..=1100)
                .filter(|nr| !with_args.contains(nr))
                .map(|nr| {
                    run(
                        &tree,
                        Call {
                            nr,
                            arch: audit_arch(arch),
                            arg0: 0,
                            arg1: 0,
                        },
                    )
                    .1
                })
                .max()
                .unwrap();
            assert!(longest <= bound, "{arch}: {longest} steps, bound {bound}");
            // Two comparisons per number at most, a few returns and the preamble.
            assert!(
                tree.len() <= 2 * numbers + 16,
                "{arch}: {} instructions",
                tree.len()
            );
            assert!(tree.len() < reference.len(), "{arch}");
        }
    }

    fn compile_json(source: &str) -> Result<BpfProgram, SeccompError> {
        compile_source("x86_64", source)
    }

    fn policy_with(rule: &str) -> String {
        format!(
            r#"{{"eperm": {{"mismatch_action": "allow", "match_action": {{"errno": 1}}, "filter": [{rule}]}},
                "enosys": {{"mismatch_action": "allow", "match_action": {{"errno": 38}}, "filter": []}}}}"#
        )
    }

    fn masked(op: &str, kind: &str, val: u64) -> String {
        policy_with(&format!(
            r#"{{"syscall": "clone", "args": [{{"index": 0, "type": "{kind}", "op": {op}, "val": {val}}}]}}"#
        ))
    }

    #[test]
    fn constructs_outside_the_supported_subset_are_refused() {
        let error = |source: String| compile_json(&source).unwrap_err().to_string();
        assert_eq!(
            error(policy_with(r#"{"syscall": "no_such_call"}"#)),
            "seccomp policy for x86_64 names the system call \"no_such_call\", unknown on x86_64"
        );
        assert_eq!(
            error(masked(r#""eq""#, "qword", 1)),
            "seccomp policy for x86_64 uses the op \"eq\" for clone, which the compiler does not support"
        );
        assert_eq!(
            error(masked(r#"{"masked_eq": 1}"#, "dword", 1)),
            "seccomp policy for x86_64 uses the argument type \"dword\" for clone, which the compiler does not support"
        );
        assert_eq!(
            error(masked(
                r#"{"masked_eq": 4294967296}"#,
                "qword",
                4_294_967_296
            )),
            "seccomp policy for x86_64 compares clone argument 0 with mask 0x100000000 and value 0x100000000, which reach beyond the low 32 bits"
        );
        assert_eq!(
            error(policy_with(r#"{"syscall": "clone", "args": []}"#)),
            "seccomp policy for x86_64 uses an empty args list for clone, which the compiler does not support"
        );
        assert_eq!(
            error(
                policy_with(r#"{"syscall": "clone"}"#)
                    .replace(r#"{"errno": 1}"#, r#""kill_process""#)
            ),
            "seccomp policy for x86_64 uses the match_action \"kill_process\" of filter \"eperm\", which the compiler does not support"
        );
        assert_eq!(
            error(policy_with(r#"{"syscall": "clone"}"#).replacen(r#""allow""#, r#""log""#, 1)),
            "seccomp policy for x86_64 uses the mismatch_action \"log\" of filter \"eperm\", which the compiler does not support"
        );
        let unknown_field =
            compile_json(&policy_with(r#"{"syscall": "clone", "action": "allow"}"#)).unwrap_err();
        assert!(
            matches!(&unknown_field, SeccompError::Parse { .. }),
            "{unknown_field:?}"
        );
        assert!(
            format!("{unknown_field:?}").contains("unknown field `action`"),
            "{unknown_field:?}"
        );
        let extra = policy_with(r#"{"syscall": "clone"}"#).replacen('{', r#"{"other": {"mismatch_action": "allow", "match_action": {"errno": 1}, "filter": []}, "#, 1);
        assert_eq!(
            error(extra),
            "seccomp policy for x86_64 has the filter \"other\", which is not one of [\"eperm\", \"enosys\"]"
        );
    }

    #[test]
    fn rules_with_several_conditions_and_several_rules_keep_their_meaning() {
        // Shapes the policy files do not use today but the format allows: AND within a
        // rule, OR of rules that are not single bits, two filters naming the same call.
        let source = r#"{
            "eperm": {"mismatch_action": "allow", "match_action": {"errno": 1}, "filter": [
                {"syscall": "socket", "args": [
                    {"index": 0, "type": "qword", "op": {"masked_eq": 255}, "val": 16},
                    {"index": 1, "type": "qword", "op": {"masked_eq": 15}, "val": 3}]},
                {"syscall": "socket", "args": [
                    {"index": 0, "type": "qword", "op": {"masked_eq": 3}, "val": 3}]},
                {"syscall": "clone", "args": [
                    {"index": 0, "type": "qword", "op": {"masked_eq": 768}, "val": 768}]}]},
            "enosys": {"mismatch_action": "allow", "match_action": {"errno": 38}, "filter": [
                {"syscall": "socket"}, {"syscall": "clone3"}]}}"#;
        let tree = compile_json(source).unwrap();
        let chained = reference_of("x86_64", source);
        let mut expected = Vec::new();
        let mut actual = Vec::new();
        for nr in 0..=500 {
            for arg0 in [0, 3, 16, 19, 0x10, 0x110, 0x300, 0x200, u64::MAX] {
                for arg1 in [0, 3, 0x13, 4] {
                    let call = Call {
                        nr,
                        arch: AUDIT_ARCH_X86_64,
                        arg0,
                        arg1,
                    };
                    expected.push((nr, arg0, arg1, run(&chained, call).0));
                    actual.push((nr, arg0, arg1, run(&tree, call).0));
                }
            }
        }
        assert_eq!(actual, expected);
    }

    #[test]
    fn large_policies_jump_through_trampolines_and_still_agree() {
        // Hundreds of numbers make the tree longer than a conditional jump reaches, so this
        // exercises the `JA` trampolines and the repeated returns.
        let rule = |nr: i32, name: &str| {
            if nr % 7 == 0 {
                format!(
                    r#"{{"syscall": "{name}", "args": [{{"index": 0, "type": "qword", "op": {{"masked_eq": 6}}, "val": 2}}]}}"#
                )
            } else {
                format!(r#"{{"syscall": "{name}"}}"#)
            }
        };
        let (mut eperm, mut enosys) = (Vec::new(), Vec::new());
        for sysno in syscalls::x86_64::Sysno::iter().filter(|s| s.id() < 330) {
            let side = if sysno.id() % 3 == 0 {
                &mut enosys
            } else {
                &mut eperm
            };
            side.push(rule(sysno.id(), sysno.name()));
        }
        let source = format!(
            r#"{{"eperm": {{"mismatch_action": "allow", "match_action": {{"errno": 1}}, "filter": [{}]}},
                "enosys": {{"mismatch_action": "allow", "match_action": {{"errno": 38}}, "filter": [{}]}}}}"#,
            eperm.join(","),
            enosys.join(",")
        );
        let tree = compile_json(&source).unwrap();
        let chained = reference_of("x86_64", &source);
        let trampolines = tree
            .iter()
            .filter(|i| u32::from(i.code) == libc::BPF_JMP | libc::BPF_JA)
            .count();
        assert!(
            tree.len() > 2 * MAX_JUMP && trampolines > 0,
            "{} {trampolines}",
            tree.len()
        );
        let answers = |program: &[sock_filter]| -> Vec<(u32, u64, u32)> {
            (0..=1100)
                .flat_map(|nr| [0, 2, 6, 4].map(|arg0| (nr, arg0)))
                .map(|(nr, arg0)| {
                    let call = Call {
                        nr,
                        arch: AUDIT_ARCH_X86_64,
                        arg0,
                        arg1: 0,
                    };
                    (nr, arg0, run(program, call).0)
                })
                .collect()
        };
        assert_eq!(answers(&tree), answers(&chained));
    }

    /// Writes the old and new programs as raw `struct sock_filter` arrays for a script that
    /// times attaching them (`/tmp/seccomp-old.bpf`, `/tmp/seccomp-new.bpf`).
    #[test]
    #[ignore = "writes files for a manual measurement"]
    fn dump_programs() {
        let raw = |program: &[sock_filter]| -> Vec<u8> {
            program
                .iter()
                .flat_map(|i| {
                    let mut bytes = Vec::with_capacity(8);
                    bytes.extend(i.code.to_ne_bytes());
                    bytes.extend([i.jt, i.jf]);
                    bytes.extend(i.k.to_ne_bytes());
                    bytes
                })
                .collect()
        };
        let arch = std::env::consts::ARCH;
        std::fs::write("/tmp/seccomp-old.bpf", raw(&reference(arch))).unwrap();
        std::fs::write("/tmp/seccomp-new.bpf", raw(&compile_for(arch).unwrap())).unwrap();
    }
}
