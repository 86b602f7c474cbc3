//! Tool argument schemas: generated from each tool's typed argument struct (schemars, JSON
//! Schema 2020-12), compiled once, and checked before anything else looks at a call. An error
//! names the field at fault as a dotted path (`env.KEY`, `command.0`).

use jsonschema::error::ValidationErrorKind;
use schemars::JsonSchema;
use serde_json::Value;

use crate::reply::ToolError;

/// A tool's schema and its compiled validator.
pub(crate) struct Checker {
    pub(crate) schema: Value,
    validator: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl Checker {
    pub(crate) fn new<T: JsonSchema>() -> Self {
        let mut schema = schemars::schema_for!(T).to_value();
        // The title is the Rust type's name, which tells a client nothing.
        if let Some(object) = schema.as_object_mut() {
            object.remove("title");
        }
        let validator = jsonschema::validator_for(&schema).ok();
        Self { schema, validator }
    }

    /// Checks `arguments`; the first error names its field.
    pub(crate) fn check(&self, arguments: &Value) -> Result<(), ToolError> {
        let Some(validator) = &self.validator else {
            // Generated schemas always compile (a unit test proves it for every tool); if one
            // did not, refusing every call is the safe answer.
            return Err(ToolError {
                field: None,
                message: "this tool's schema does not compile".to_owned(),
            });
        };
        let Err(error) = validator.validate(arguments) else {
            return Ok(());
        };
        let mut field: Vec<String> = error
            .instance_path()
            .as_str()
            .split('/')
            .skip(1)
            .map(|part| part.replace("~1", "/").replace("~0", "~"))
            .collect();
        let message = match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default().to_owned();
                field.push(name);
                "is required".to_owned()
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                if let Some(first) = unexpected.first() {
                    field.push(first.clone());
                }
                "is not an argument of this tool".to_owned()
            }
            _ => error.to_string(),
        };
        Err(ToolError {
            field: Some(if field.is_empty() {
                "arguments".to_owned()
            } else {
                field.join(".")
            }),
            message,
        })
    }
}
