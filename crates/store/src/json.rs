//! JSON columns: how maps, lists and free-form values become TEXT and come back.
//!
//! Encoding goes through [`serde_json::Value`], which cannot fail for these shapes, so only
//! decoding has an error (text in the database that is not what the column promises).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::StoreError;

/// A string map as a JSON object.
pub(crate) fn encode_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect::<Value>()
        .to_string()
}

/// A list of strings as a JSON array.
pub(crate) fn encode_list(list: &[String]) -> String {
    Value::from(list).to_string()
}

/// Decodes a JSON column into `T`; `what` names the column for the error.
pub(crate) fn decode<T: DeserializeOwned>(what: &'static str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|source| StoreError::Decode { what, source })
}

/// Decodes a nullable JSON column. A stored JSON `null` stays `Some(Value::Null)`, apart from
/// SQL `NULL`, which is `None`.
pub(crate) fn decode_optional(
    what: &'static str,
    text: Option<&str>,
) -> Result<Option<Value>, StoreError> {
    text.map(|text| decode(what, text)).transpose()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn maps_and_lists_round_trip() {
        let map = BTreeMap::from([
            ("b".to_owned(), "2".to_owned()),
            ("a".to_owned(), "quote \" and \\".to_owned()),
        ]);
        let list = vec!["pip install x".to_owned(), String::new()];
        let encoded = (encode_map(&map), encode_list(&list));
        assert_eq!(
            encoded,
            (
                r#"{"a":"quote \" and \\","b":"2"}"#.to_owned(),
                r#"["pip install x",""]"#.to_owned()
            )
        );
        let decoded: (BTreeMap<String, String>, Vec<String>) = (
            decode("map", &encoded.0).unwrap(),
            decode("list", &encoded.1).unwrap(),
        );
        assert_eq!(decoded, (map, list));
    }

    #[test]
    fn stored_null_is_not_sql_null() {
        let decoded = (
            decode_optional("data", Some("null")).unwrap(),
            decode_optional("data", None).unwrap(),
        );
        assert_eq!(decoded, (Some(json!(null)), None));
    }

    #[test]
    fn bad_text_names_the_column() {
        let error = decode::<Vec<String>>("template setup", "{").unwrap_err();
        assert_eq!(error.to_string(), "stored template setup is not valid JSON");
    }
}
