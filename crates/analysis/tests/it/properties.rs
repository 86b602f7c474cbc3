//! Properties over arbitrary input: analysis never panics, and bracket reports agree with
//! themselves.

use forge_analysis::{Language, brackets, functions, validate};
use proptest::prelude::*;

fn language() -> impl Strategy<Value = Language> {
    proptest::sample::select(Language::ALL.to_vec())
}

/// Text biased towards code: brackets, quotes, comment markers, keywords, newlines.
fn codeish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("\"".to_owned()),
        Just("'".to_owned()),
        Just("`".to_owned()),
        Just("#".to_owned()),
        Just("//".to_owned()),
        Just("/*".to_owned()),
        Just("*/".to_owned()),
        Just("\n".to_owned()),
        Just("def f(".to_owned()),
        Just("fn main() ".to_owned()),
        Just("eval(x)".to_owned()),
        Just("case x in a) ".to_owned()),
        "[a-z ]{0,6}".prop_map(|s| s),
        any::<char>().prop_map(|c| c.to_string()),
    ];
    proptest::collection::vec(piece, 0..80).prop_map(|pieces| pieces.concat())
}

/// Realistic source per language, exercising the grammars' harder corners (f-strings,
/// generics, JSX, lifetimes and raw strings, channels, heredocs and brace expansion).
const SAMPLES: &[(Language, &str)] = &[
    (
        Language::Python,
        "def f(a, b=1, *c, **d):\n    return [x async for x in y if x] + {k: v for k, v in z}\n@dec\nclass A(B, metaclass=M):\n    x: int = f'{a!r:>{w}}'\n",
    ),
    (
        Language::JavaScript,
        "const f = async ({a, b: [c]}, ...r) => { for await (const x of y) { z?.w ?? `${q}` } }; class A extends B { #p = 1; static { } }\n",
    ),
    (
        Language::Tsx,
        "let x: Map<string, Array<[number, string?]>> = new Map(); function g<T extends keyof U>(a: T): asserts a is T {}\nconst el = <div a={1}>{x}</div>;\n",
    ),
    (
        Language::Rust,
        "fn f<'a, T: Fn(&'a str) -> u8>(x: &'a T) -> impl Iterator<Item = u8> + 'a { r#\"raw\"#; b'x'; macro_rules! m { ($e:expr) => {} } }\n",
    ),
    (
        Language::Go,
        "package p\nfunc (s *S[T]) M(ch <-chan int) (r []map[string]func() error) { select { case x := <-ch: _ = x; default: }; goto L; L: }\n",
    ),
    (
        Language::Shell,
        "f() { local x=${1:-d}; cat <<-EOF\n\t$x $(echo `a`)\n\tEOF\n[[ $x =~ ^a.*$ ]] && (( x += 1 )); case $x in a|b) ;; esac; arr=( {1..3} ); }\n",
    ),
];

/// A sample with a few characters inserted or removed at random.
fn mutated() -> impl Strategy<Value = (Language, String)> {
    let edits = proptest::collection::vec(
        (
            any::<proptest::sample::Index>(),
            any::<char>(),
            any::<bool>(),
        ),
        1..8,
    );
    (proptest::sample::select(SAMPLES.to_vec()), edits).prop_map(|((language, sample), edits)| {
        let mut chars: Vec<char> = sample.chars().collect();
        for (index, ch, insert) in edits {
            if chars.is_empty() {
                chars.push(ch);
                continue;
            }
            let at = index.index(chars.len());
            if insert {
                chars.insert(at, ch);
            } else {
                chars.remove(at);
            }
        }
        (language, chars.into_iter().collect())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn validate_and_functions_never_panic(language in language(), source in codeish()) {
        let report = validate(language, &source).unwrap();
        prop_assert_eq!(report.valid, report.syntax_errors.is_empty());
        for error in &report.syntax_errors {
            prop_assert!(error.start.line >= 1 && error.start.column >= 1);
            prop_assert!(error.start <= error.end);
        }
        functions(language, &source).unwrap();
    }

    #[test]
    fn brackets_never_panic(language in proptest::option::of(language()), source in codeish()) {
        let report = brackets(&source, language).unwrap();
        prop_assert_eq!(report.balanced, report.issues.is_empty());
        prop_assert!(report.issues.len() <= forge_analysis::MAX_BRACKET_ISSUES);
    }

    #[test]
    fn balanced_plain_brackets_are_balanced(depth in 0_usize..200) {
        let source = format!("{}{}", "([{".repeat(depth), "}])".repeat(depth));
        let report = brackets(&source, None).unwrap();
        prop_assert!(report.balanced);
        prop_assert_eq!(report.max_depth, depth * 3);
    }

    #[test]
    fn mutated_samples_never_panic((language, source) in mutated()) {
        validate(language, &source).unwrap();
        functions(language, &source).unwrap();
        brackets(&source, Some(language)).unwrap();
    }

    #[test]
    fn arbitrary_text_never_panics(language in language(), source in any::<String>()) {
        validate(language, &source).unwrap();
        brackets(&source, None).unwrap();
    }
}
