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
    fn arbitrary_text_never_panics(language in language(), source in any::<String>()) {
        validate(language, &source).unwrap();
        brackets(&source, None).unwrap();
    }
}
