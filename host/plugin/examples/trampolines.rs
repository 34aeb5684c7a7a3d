//! How many array-to-wasm trampolines wasmtime compiles for a component,
//! against how many of its functions the host can ever call.
//!
//! wasmtime compiles one such trampoline, with Cranelift even in a Winch
//! compilation, for every function that escapes its core module (exported,
//! placed in a table or named by `ref.func`). The host calls a component
//! only through its lifted exports (`canon lift`). `docs/performance.md`
//! ("Which trampolines, and how many") gives the figures for `tasks` and
//! `regex`:
//!
//! ```sh
//! cargo run --example trampolines -p envhost-plugin -- target/polyglot/tasks.wasm
//! ```
//!
//! It reads the file and prints; it compiles nothing.

use std::collections::{BTreeSet, HashSet};

use wasmparser::{
    CanonicalFunction, ElementItems, ExternalKind, Operator, Parser, Payload, TypeRef,
};

/// One core module's functions, as far as trampolines go.
#[derive(Default)]
struct CoreModule {
    /// Every type, as text: two indices of one structure are one
    /// signature to wasmtime, which canonicalises types.
    types: Vec<String>,
    /// The type index of every function, imports first.
    function_types: Vec<u32>,
    imported: u32,
    /// Functions that escape: exported, in a table, named by `ref.func`.
    escaping: BTreeSet<u32>,
    exported: BTreeSet<u32>,
}

impl CoreModule {
    fn defined(&self) -> usize {
        self.function_types.len() - self.imported as usize
    }

    /// The escaping functions this module defines: one trampoline each.
    fn trampolines(&self) -> Vec<u32> {
        self.escaping
            .iter()
            .copied()
            .filter(|&index| index >= self.imported)
            .collect()
    }

    /// The trampolines of exported functions only.
    fn exported_trampolines(&self) -> usize {
        self.exported
            .iter()
            .filter(|&&index| index >= self.imported)
            .count()
    }

    fn signatures(&self) -> usize {
        let types: HashSet<&str> = self
            .trampolines()
            .iter()
            .filter_map(|&index| self.function_types.get(index as usize))
            .filter_map(|&ty| self.types.get(ty as usize))
            .map(String::as_str)
            .collect();
        types.len()
    }

    fn note_ref_funcs(&mut self, operators: wasmparser::OperatorsReader<'_>) {
        for operator in operators.into_iter().flatten() {
            if let Operator::RefFunc { function_index } = operator {
                self.escaping.insert(function_index);
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = std::env::args().nth(1) else {
        return Err("usage: trampolines <component.wasm>".into());
    };
    let bytes = std::fs::read(&path)?;
    let mut finished = Vec::new();
    let mut outer = Vec::new();
    let mut current = CoreModule::default();
    let mut lifted = 0;
    for payload in Parser::new(0).parse_all(&bytes) {
        match payload? {
            Payload::ModuleSection { .. } => outer.push(std::mem::take(&mut current)),
            Payload::TypeSection(reader) => {
                for group in reader {
                    for ty in group?.into_types() {
                        current.types.push(format!("{:?}", ty.composite_type));
                    }
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    if let TypeRef::Func(index) = import?.ty {
                        current.function_types.push(index);
                        current.imported += 1;
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for index in reader {
                    current.function_types.push(index?);
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export?;
                    if export.kind == ExternalKind::Func {
                        current.escaping.insert(export.index);
                        current.exported.insert(export.index);
                    }
                }
            }
            Payload::ElementSection(reader) => {
                for element in reader {
                    match element?.items {
                        ElementItems::Functions(functions) => {
                            for function in functions {
                                current.escaping.insert(function?);
                            }
                        }
                        ElementItems::Expressions(_, expressions) => {
                            for expression in expressions {
                                current.note_ref_funcs(expression?.get_operators_reader());
                            }
                        }
                    }
                }
            }
            Payload::CodeSectionEntry(body) => current.note_ref_funcs(body.get_operators_reader()?),
            Payload::ComponentCanonicalSection(reader) => {
                for function in reader {
                    if matches!(function?, CanonicalFunction::Lift { .. }) {
                        lifted += 1;
                    }
                }
            }
            Payload::End(_) => {
                let parent = outer.pop();
                if parent.is_some() {
                    finished.push(std::mem::take(&mut current));
                }
                current = parent.unwrap_or_default();
            }
            _ => {}
        }
    }
    let with_code: Vec<&CoreModule> = finished.iter().filter(|m| m.defined() > 0).collect();
    let defined: usize = with_code.iter().map(|m| m.defined()).sum();
    let trampolines: usize = with_code.iter().map(|m| m.trampolines().len()).sum();
    let signatures: usize = with_code.iter().map(|m| m.signatures()).sum();
    println!("{path}");
    println!(
        "  core modules with code: {}; functions defined: {defined}",
        with_code.len()
    );
    let exported: usize = with_code.iter().map(|m| m.exported_trampolines()).sum();
    println!("  array-to-wasm trampolines compiled: {trampolines}");
    println!("  of them for exported functions: {exported}");
    println!("  distinct signatures among them (summed over the modules): {signatures}");
    println!("  functions the host can call (canon lift): {lifted}");
    for module in &with_code {
        println!(
            "    a core module: {} defined, {} trampolines, {} signatures",
            module.defined(),
            module.trampolines().len(),
            module.signatures()
        );
    }
    Ok(())
}
