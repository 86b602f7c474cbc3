//! `functions_mapping`: the definitions in one source text — functions, methods and the
//! types that hold them — with where they are and a one-line signature.

use serde::Serialize;
use tree_sitter::Node;

use crate::language::Language;
use crate::parse::{AnalysisError, parse};

/// At most this many symbols are returned for one source text.
pub const MAX_SYMBOLS: usize = 5000;

/// The longest signature kept, in characters.
const SIGNATURE_CHARS: usize = 200;

/// What a symbol is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SymbolKind {
    Function,
    /// A function defined in a class, impl, trait or interface (or a Go method).
    Method,
    Class,
    Struct,
    Enum,
    Union,
    Trait,
    /// A Rust `impl` block, named `Type` or `Trait for Type`.
    Impl,
    Interface,
    /// A Rust `mod` with a body.
    Module,
}

/// One definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Symbol {
    pub name: String,
    pub kind: SymbolKind,
    /// The enclosing definition (class, impl, trait, interface, function), or for a Go
    /// method its receiver type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// 1-based, inclusive.
    pub start_line: usize,
    pub end_line: usize,
    /// The definition's head up to its body, on one line: `def area(self, scale: float) -> float`,
    /// `pub fn new(path: &Path) -> Result<Self>`.
    pub signature: String,
}

/// The definitions in `source`, in document order, at most [`MAX_SYMBOLS`]. Source with
/// syntax errors still yields whatever the parser recovered.
pub fn functions(language: Language, source: &str) -> Result<Vec<Symbol>, AnalysisError> {
    let tree = parse(language, source)?;
    let mut symbols = Vec::new();
    // Depth-first without recursion: each entry is a node and the name of the definition
    // that encloses it.
    let mut stack: Vec<(Node<'_>, Option<Container>)> = vec![(tree.root_node(), None)];
    while let Some((node, container)) = stack.pop() {
        if symbols.len() >= MAX_SYMBOLS {
            break;
        }
        let found = classify(language, node, container.as_ref(), source);
        let inner = match found {
            Some(symbol) => {
                let next = Container {
                    name: symbol.name.clone(),
                    holds_methods: matches!(
                        symbol.kind,
                        SymbolKind::Class
                            | SymbolKind::Impl
                            | SymbolKind::Trait
                            | SymbolKind::Interface
                    ),
                };
                symbols.push(symbol);
                Some(next)
            }
            None => container,
        };
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        for child in children.into_iter().rev() {
            stack.push((child, inner.clone()));
        }
    }
    Ok(symbols)
}

#[derive(Debug, Clone)]
struct Container {
    name: String,
    holds_methods: bool,
}

fn classify(
    language: Language,
    node: Node<'_>,
    container: Option<&Container>,
    source: &str,
) -> Option<Symbol> {
    let in_type = container.is_some_and(|c| c.holds_methods);
    let function_kind = if in_type {
        SymbolKind::Method
    } else {
        SymbolKind::Function
    };
    let js = matches!(
        language,
        Language::JavaScript | Language::TypeScript | Language::Tsx
    );
    let ts = matches!(language, Language::TypeScript | Language::Tsx);
    let named = |kind: SymbolKind| Some((kind, field(node, "name", source)?, None));
    let (kind, name, parent) = match (language, node.kind()) {
        (Language::Python | Language::Rust, "function_definition" | "function_item") => {
            named(function_kind)?
        }
        (Language::Python, "class_definition") => named(SymbolKind::Class)?,
        (_, "function_declaration" | "generator_function_declaration")
            if js || language == Language::Go =>
        {
            named(SymbolKind::Function)?
        }
        (_, "class_declaration" | "abstract_class_declaration" | "class") if js => {
            named(SymbolKind::Class)?
        }
        (_, "method_definition" | "method_signature" | "abstract_method_signature") if js => {
            named(SymbolKind::Method)?
        }
        (_, "variable_declarator") if js => {
            let value = node.child_by_field_name("value")?;
            if !matches!(
                value.kind(),
                "arrow_function" | "function_expression" | "function" | "generator_function"
            ) {
                return None;
            }
            named(function_kind)?
        }
        (_, "interface_declaration") if ts => named(SymbolKind::Interface)?,
        (_, "enum_declaration") if ts => named(SymbolKind::Enum)?,
        (Language::Rust, "function_signature_item")
        | (Language::Go, "method_elem" | "method_spec") => named(SymbolKind::Method)?,
        (Language::Rust, "struct_item") => named(SymbolKind::Struct)?,
        (Language::Rust, "enum_item") => named(SymbolKind::Enum)?,
        (Language::Rust, "union_item") => named(SymbolKind::Union)?,
        (Language::Rust, "trait_item") => named(SymbolKind::Trait)?,
        (Language::Rust, "mod_item") if node.child_by_field_name("body").is_some() => {
            named(SymbolKind::Module)?
        }
        (Language::Rust, "impl_item") => {
            let ty = field(node, "type", source)?;
            let name = match field(node, "trait", source) {
                Some(tr) => format!("{tr} for {ty}"),
                None => ty,
            };
            (SymbolKind::Impl, name, None)
        }
        (Language::Go, "method_declaration") => {
            let receiver = node
                .child_by_field_name("receiver")
                .and_then(|r| go_receiver_type(r, source));
            (SymbolKind::Method, field(node, "name", source)?, receiver)
        }
        (Language::Go, "type_spec") => {
            let kind = match node.child_by_field_name("type")?.kind() {
                "struct_type" => SymbolKind::Struct,
                "interface_type" => SymbolKind::Interface,
                _ => return None,
            };
            named(kind)?
        }
        (Language::Shell, "function_definition") => named(SymbolKind::Function)?,
        _ => return None,
    };
    Some(Symbol {
        name,
        kind,
        parent: parent.or_else(|| container.map(|c| c.name.clone())),
        start_line: node.start_position().row + 1,
        end_line: node.end_position().row + 1,
        signature: signature(language, node, source),
    })
}

fn field(node: Node<'_>, name: &str, source: &str) -> Option<String> {
    let child = node.child_by_field_name(name)?;
    source.get(child.byte_range()).map(str::to_owned)
}

/// The type a Go receiver names, without pointer or type parameters: `(s *Server[T])` → `Server`.
fn go_receiver_type(receiver: Node<'_>, source: &str) -> Option<String> {
    let mut cursor = receiver.walk();
    let parameter = receiver
        .named_children(&mut cursor)
        .find(|c| c.kind() == "parameter_declaration")?;
    let ty = parameter.child_by_field_name("type")?;
    let text = source.get(ty.byte_range())?;
    let text = text.trim_start_matches('*');
    let text = text.split('[').next().unwrap_or(text);
    Some(text.trim().to_owned())
}

/// The head of a definition up to its body, whitespace collapsed to single spaces.
fn signature(language: Language, node: Node<'_>, source: &str) -> String {
    let start = node.start_byte();
    let body = match (language, node.kind()) {
        (Language::Go, "type_spec") => node
            .child_by_field_name("type")
            .and_then(|t| t.named_child(0).or(Some(t))),
        _ => node.child_by_field_name("body"),
    };
    let end = match (language, node.kind(), body) {
        // `type Point struct {`: keep the keyword, drop the fields.
        (Language::Go, "type_spec", Some(fields)) if fields.kind() != "type_spec" => {
            fields.start_byte()
        }
        (Language::JavaScript | Language::TypeScript | Language::Tsx, "variable_declarator", _) => {
            node.child_by_field_name("value")
                .and_then(|v| v.child_by_field_name("body"))
                .map_or(node.end_byte(), |b| b.start_byte())
        }
        (_, _, Some(body)) if body.start_byte() > start => body.start_byte(),
        _ => node.end_byte(),
    };
    let head = source.get(start..end).unwrap_or_default();
    let mut collapsed = head.split_whitespace().collect::<Vec<_>>().join(" ");
    while let Some(stripped) = collapsed
        .strip_suffix('{')
        .or_else(|| collapsed.strip_suffix(':'))
        .or_else(|| collapsed.strip_suffix(';'))
        .or_else(|| collapsed.strip_suffix(','))
    {
        collapsed = stripped.trim_end().to_owned();
    }
    if language == Language::Go && node.kind() == "type_spec" {
        collapsed.insert_str(0, "type ");
    }
    if collapsed.chars().count() > SIGNATURE_CHARS {
        let mut cut: String = collapsed.chars().take(SIGNATURE_CHARS).collect();
        cut.push('…');
        return cut;
    }
    collapsed
}
