//! The house's layout, checked: no import circle between the files of any crate (issue 34).
//!
//! A file imports another when one of its `crate::`, `self::` or `super::` paths (in `use`
//! items, braces expanded, or written inline) names an item of the other: the path resolves to
//! the deepest module that is a file. Re-exports (`pub use`) are a module's face, not a need:
//! they are not counted. Comments and the test modules at the end of a file
//! (`#[cfg(test)]` at the start of a line) are left out, and so are files that are only test
//! modules (`tests.rs`, `*_tests.rs`): tests may reach anywhere. A circle is a set of files
//! each of which reaches the others through such imports (a strongly connected component of
//! the graph).
//!
//! Circles that are known and not yet taken apart are listed in [`KNOWN`]; the test fails when
//! a new one appears, and when a listed one is gone (so the list stays true: remove it).
//!
//! In sim, the largest crate, nothing imports back up from a lower folder either: no file needs
//! an item of a module its folder lies under (the parent's `mod.rs`, or the `x.rs` whose
//! children sit in `x/`). What the parent holds for its children lives in a sibling file they
//! import sideways (`apiserver/server.rs`, `cluster/notify.rs`, `controllers/error.rs`,
//! `faults/admission.rs`). A visibility path (`pub(in crate::x)`) names no item and is not an
//! import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles not yet taken apart, as their files relative to the repository, sorted, each with
/// the issue that takes it apart. None: every crate is free of them, and a new one is fixed,
/// not listed, unless it cannot be in the change that makes it.
const KNOWN: &[&[&str]] = &[];

/// The source folders of the workspace's crates.
const CRATES: &[&str] = &[
    "core/src",
    "runtime/src",
    "agent/src",
    "coordinator/src",
    "sim/src",
    "devcluster/src",
    "tests/src",
    "plugin/src",
    "scaling/src",
    "demo/checkpoint/src",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under its crate's `src` (`a/b.rs` and `a/b/mod.rs`: `[a, b]`;
/// `lib.rs`, `main.rs`: `[]`; binaries under `bin/` are their own roots, `[bin, name]`).
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    parts
}

/// The text of `source` that the product compiles: no comments, nothing from the first
/// `#[cfg(test)]` that starts a line.
fn product_code(source: &str) -> String {
    let mut out = String::new();
    for line in source.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let mut code = line.split("//").next().unwrap_or("").to_owned();
        // `pub(in crate::x)` restricts visibility; it imports nothing.
        while let Some(at) = code.find("pub(in ") {
            let Some(close) = code[at..].find(')') else {
                break;
            };
            code.replace_range(at..at + close + 1, "pub");
        }
        out.push_str(&code);
        out.push('\n');
    }
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        // `a::B as C` names `a::B`.
        let path = tree.split(" as ").next().unwrap_or(tree);
        return vec![path.replace(' ', "")];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let inner = tree[open + 1..].trim_end().trim_end_matches('}');
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|i| !i.trim().is_empty())
        .flat_map(expand)
        .map(|p| {
            let p = p.trim();
            if p == "self" {
                prefix.to_owned()
            } else {
                format!("{prefix}::{p}")
            }
        })
        .collect()
}

/// The `crate::`/`self::`/`super::` paths `code` names: `use` trees expanded, and paths
/// written inline.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `use` items (possibly over several lines), blanked out of what the inline scan reads.
    let mut inline = code.to_owned();
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let start = from + at;
        let tree_start = start + 4;
        let end = code[tree_start..]
            .find(';')
            .map_or(code.len(), |e| tree_start + e);
        from = end;
        let before = code[..start].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        inline.replace_range(start..end, &" ".repeat(end - start));
        // A re-export (`pub use self::child::Item`) is the module's face, not a need of its
        // own: a parent that re-exports a child which uses the parent's types is no circle.
        if code[..start].trim_end().ends_with("pub") || code[..start].trim_end().ends_with(')') {
            continue;
        }
        let tree = code[tree_start..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out.extend(expand(&tree));
    }
    // Inline paths.
    let code = inline.as_str();
    let bytes = code.as_bytes();
    for root in ["crate::", "self::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root) {
            let start = from + at;
            from = start + root.len();
            if start > 0 {
                let c = bytes[start - 1] as char;
                if c.is_alphanumeric() || c == '_' || c == '$' || c == ':' {
                    continue;
                }
            }
            let end = code[start..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| start + e);
            out.push(code[start..end].trim_end_matches(':').to_owned());
        }
    }
    out.into_iter()
        .filter(|p| {
            ["crate::", "self::", "super::"]
                .iter()
                .any(|r| p.starts_with(r))
                || p == "super"
        })
        .collect()
}

/// The module `path`, written in module `from` of the crate rooted at `root`, resolves to
/// among `modules`: its deepest prefix that is a file.
fn resolve(
    path: &str,
    from: &[String],
    modules: &BTreeSet<Vec<String>>,
    root: &[String],
) -> Option<Vec<String>> {
    let mut segments = path.split("::").filter(|s| !s.is_empty());
    let mut module: Vec<String> = match segments.next()? {
        "crate" => root.to_vec(),
        "self" => from.to_vec(),
        "super" => {
            let mut m = from.to_vec();
            m.pop()?;
            m
        }
        _ => return None,
    };
    let mut resolved = module.clone();
    for s in segments {
        if s == "super" {
            module.pop()?;
            resolved = module.clone();
            continue;
        }
        module.push(s.to_owned());
        if modules.contains(&module) {
            resolved = module.clone();
        } else {
            break;
        }
    }
    Some(resolved)
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let low = s.low[v].min(s.low[w.as_str()]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w.as_str()) {
                let low = s.low[v].min(s.index[w.as_str()]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The import graph of one crate's files, by path relative to the repository.
fn graph(src: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = repo().join(src);
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let is_test_module = |p: &Path| {
        p.file_stem()
            .and_then(|s| s.to_str())
            .is_some_and(|s| s == "tests" || s.ends_with("_tests"))
    };
    let files: Vec<PathBuf> = files.into_iter().filter(|p| !is_test_module(p)).collect();
    let mut by_module: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for f in &files {
        let relative = f.strip_prefix(&dir).expect("under its crate");
        by_module.insert(module_of(relative), format!("{src}/{}", relative.display()));
    }
    let modules: BTreeSet<Vec<String>> = by_module.keys().cloned().collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let relative = f.strip_prefix(&dir).expect("under its crate");
        let module = module_of(relative);
        let name = by_module[&module].clone();
        // A binary under bin/ is its own crate root.
        let root: Vec<String> = if module.first().is_some_and(|m| m == "bin") {
            module.clone()
        } else {
            Vec::new()
        };
        let source = std::fs::read_to_string(f).expect("reading a source file");
        let targets = edges.entry(name.clone()).or_default();
        for path in paths(&product_code(&source)) {
            let Some(target) = resolve(&path, &module, &modules, &root) else {
                continue;
            };
            // The crate root only declares modules and re-exports.
            if target.is_empty() || target == root {
                continue;
            }
            if let Some(file) = by_module.get(&target)
                && *file != name
            {
                targets.insert(file.clone());
            }
        }
    }
    edges
}

#[test]
fn use_trees_expand_to_their_paths() {
    assert_eq!(
        expand("super::{accept, auth::{Access, ApiAuth as Auth}, self}"),
        [
            "super::accept",
            "super::auth::Access",
            "super::auth::ApiAuth",
            "super"
        ]
    );
    let code = "use crate::a::{b, c::D};\nfn f() { crate::e::f(); x::crate_y(); }\n";
    let found: BTreeSet<String> = paths(code).into_iter().collect();
    assert_eq!(
        found,
        ["crate::a::b", "crate::a::c::D", "crate::e::f"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    );
}

#[test]
fn a_circle_is_found_and_a_chain_is_not() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry((*a).to_owned())
                .or_default()
                .insert((*b).to_owned());
            g.entry((*b).to_owned()).or_default();
        }
        g
    };
    assert!(circles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
    assert_eq!(
        circles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
        [["a", "b", "c"]]
    );
}

/// No crate has an import circle between its files but the ones [`KNOWN`] lists.
#[test]
fn no_import_circle_between_files() {
    let mut found = Vec::new();
    for src in CRATES {
        found.extend(circles(&graph(src)));
    }
    let known: Vec<Vec<String>> = KNOWN
        .iter()
        .map(|c| c.iter().map(|f| (*f).to_owned()).collect())
        .collect();
    let new: Vec<&Vec<String>> = found.iter().filter(|c| !known.contains(c)).collect();
    let gone: Vec<&Vec<String>> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(
        new.is_empty(),
        "import circles between files (a file that needs a sibling's type while the sibling \
         needs its own: move the shared type or the decision to a third module): {new:#?}"
    );
    assert!(
        gone.is_empty(),
        "these circles are gone: remove them from KNOWN in tests/tests/layout.rs: {gone:#?}"
    );
}

/// The imports in `src` that go back up: to the file of a module under whose folder the
/// importing file lies.
fn upward_imports(src: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (file, targets) in graph(src) {
        for target in targets {
            let folder = target
                .strip_suffix("/mod.rs")
                .or_else(|| target.strip_suffix(".rs"))
                .expect("a Rust file");
            if file.starts_with(&format!("{folder}/")) {
                found.push((file.clone(), target));
            }
        }
    }
    found
}

/// Nothing in sim imports back up from a lower folder (issue 34).
#[test]
fn nothing_in_sim_imports_back_up_from_a_lower_folder() {
    let found = upward_imports("sim/src");
    assert!(
        found.is_empty(),
        "files that import from a module their folder lies under (move what they need to a \
         sibling file they import sideways): {found:#?}"
    );
}

#[test]
fn a_visibility_path_is_not_an_import() {
    let code = "pub(in crate::apiserver) fn f() {}\nuse super::Server;\n";
    let found: BTreeSet<String> = paths(&product_code(code)).into_iter().collect();
    assert_eq!(
        found,
        ["super::Server"].into_iter().map(str::to_owned).collect()
    );
}
