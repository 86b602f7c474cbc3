//! `functions`: the symbols of representative files per language, as snapshots.

use forge_analysis::{Language, Symbol, SymbolKind, functions};
use pretty_assertions::assert_eq;

fn snapshot(name: &str, language: Language, source: &str) {
    let symbols = functions(language, source).unwrap();
    insta::assert_json_snapshot!(name, symbols);
}

#[test]
fn python() {
    snapshot(
        "symbols_python",
        Language::Python,
        r#"import math

def area(r: float) -> float:
    return math.pi * r * r

class Shape:
    """A shape."""

    def __init__(self, name):
        self.name = name

    @property
    def label(self) -> str:
        def inner():
            return self.name
        return inner()

    async def fetch(self, url, *, timeout=10):
        pass
"#,
    );
}

#[test]
fn javascript() {
    snapshot(
        "symbols_javascript",
        Language::JavaScript,
        r"export function add(a, b) {
  return a + b;
}
const mul = (a, b) => a * b;
const legacy = function (x) { return x; };
class Counter extends Base {
  constructor(start) { super(); this.n = start; }
  increment(by = 1) { this.n += by; }
  static create() { return new Counter(0); }
}
function* ids() { yield 1; }
",
    );
}

#[test]
fn typescript() {
    snapshot(
        "symbols_typescript",
        Language::TypeScript,
        r#"export interface Store<T> {
  get(key: string): T | undefined;
  set(key: string, value: T): void;
}
export enum Mode { Fast, Safe }
export abstract class Base {
  abstract name(): string;
  describe(): string { return this.name(); }
}
export const handler = async (req: Request): Promise<Response> => {
  return new Response("ok");
};
"#,
    );
}

#[test]
fn rust() {
    snapshot(
        "symbols_rust",
        Language::Rust,
        r"pub struct Point { x: f64, y: f64 }
pub struct Meters(f64);
pub enum Shape { Circle(f64), Square(f64) }
pub trait Area {
    fn area(&self) -> f64;
    fn double(&self) -> f64 { self.area() * 2.0 }
}
impl Point {
    pub fn new(x: f64, y: f64) -> Self { Self { x, y } }
}
impl Area for Shape {
    fn area(&self) -> f64 {
        match self { Shape::Circle(r) => r * r, Shape::Square(s) => s * s }
    }
}
mod tests {
    fn helper<T: Clone>(value: &T) -> T
    where
        T: Default,
    {
        value.clone()
    }
}
pub async fn serve(addr: &str) -> std::io::Result<()> { Ok(()) }
",
    );
}

#[test]
fn go() {
    snapshot(
        "symbols_go",
        Language::Go,
        r"package shapes

type Point struct {
	X, Y float64
}

type Shape interface {
	Area() float64
}

func New(x, y float64) *Point {
	return &Point{x, y}
}

func (p *Point) Scale(f float64) {
	p.X *= f
}

func (s Stack[T]) Len() int { return len(s.items) }
",
    );
}

#[test]
fn shell() {
    snapshot(
        "symbols_shell",
        Language::Shell,
        "#!/bin/bash\nsetup() {\n  mkdir -p build\n}\nfunction clean {\n  rm -rf build\n}\nsetup\n",
    );
}

#[test]
fn broken_source_still_yields_what_parsed() {
    let source = "def ok(a):\n    return a\n\ndef broken(:\n    pass\n";
    let symbols = functions(Language::Python, source).unwrap();
    let first: &Symbol = &symbols[0];
    assert_eq!(
        (
            first.name.as_str(),
            first.kind,
            first.start_line,
            first.end_line
        ),
        ("ok", SymbolKind::Function, 1, 2)
    );
}
