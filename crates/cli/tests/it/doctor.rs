//! `forge doctor` as an operator runs it: the host report, stale sandbox cgroups swept, and
//! a real sandbox started, used and removed.

use pretty_assertions::assert_eq;

use crate::images::forge;

#[test]
fn doctor_reports_every_check_and_runs_a_sandbox() {
    let data = forge_test_support::data_dir();
    let dir = data.path().to_str().unwrap();
    let (code, out, err) = forge(&["doctor", "--data-dir", dir], &[]);
    assert_eq!(code, Some(0), "{err}");
    let checks: Vec<(&str, &str)> = out
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?, words.next()?))
        })
        // `!` says the doctor acted (it removed stale cgroups): not a failure.
        .map(|(mark, name)| (name, if mark == "✗" { "not ok" } else { "ok" }))
        .filter(|(name, _)| !matches!(*name, "kvm" | "network"))
        .collect();
    // KVM and pasta depend on the host; everything else is what CI's machine has.
    assert_eq!(
        checks,
        [
            ("kernel", "ok"),
            ("privileges", "ok"),
            ("namespaces", "ok"),
            ("seccomp", "ok"),
            ("landlock", "ok"),
            ("cgroups", "ok"),
            ("overlayfs", "ok"),
            ("leftovers", "ok"),
            ("sandbox", "ok"),
        ],
        "{out}"
    );
}
