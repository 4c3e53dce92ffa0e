//! Embeds the built-in model documents (`catalog/models/*.json` at the workspace's top) so that
//! adding a model is adding a file: the list of files is generated here, never written in code.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalog/models");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let mut code =
        String::from("/// The built-in model documents: (file name, text).\npub const BUILTIN: &[(&str, &str)] = &[\n");
    for path in &files {
        println!("cargo::rerun-if-changed={}", path.display());
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let _ = writeln!(code, "    ({name:?}, include_str!({:?})),", path.display().to_string());
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap_or_else(|e| panic!("OUT_DIR: {e}"))).join("builtin_models.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
