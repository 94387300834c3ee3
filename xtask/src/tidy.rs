//! `cargo xtask tidy`: the workspace's structural rules, checked from the sources and
//! `cargo metadata`, so that a change breaking one fails CI instead of waiting for review.
//!
//! 1. **Layering.** Each workspace crate depends (normal dependencies) only on the workspace
//!    crates the `tidy:dependencies` block of `docs/ARCHITECTURE.md` allows it.
//! 2. **No unused dependencies.** Every declared dependency is named in the code that can use
//!    it: a normal or build dependency in `src/` or `build.rs`, a dev-dependency anywhere in
//!    the package.
//! 3. **Documented libraries.** Every library crate's root file says `#![deny(missing_docs)]`.
//! 4. **No long functions.** No function outside tests is longer than [`MAX_FUNCTION_LINES`]
//!    lines (from `fn` to its closing brace), except those listed in
//!    [`LONG_FUNCTIONS`] with their current length. The list may only shrink: an entry whose
//!    function grew, shrank, or is gone is an error that says what to write instead.
//! 5. **No large structs.** No struct of the binary or the session library has more than
//!    [`MAX_STRUCT_FIELDS`] named fields, except those in [`LARGE_STRUCTS`] (which, as the
//!    functions' list, may only shrink).
//! 6. **A thin binary.** The binary's sources stay under [`MAX_BINARY_LINES`] lines outside
//!    tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The longest a function may be, in lines (issue 43).
pub(crate) const MAX_FUNCTION_LINES: usize = 120;

/// The allow-list of longer functions, relative to the workspace root: one per line,
/// `PATH NAME LINES` (`crates/cli/src/session.rs Session::open 441`); `#` starts a comment.
pub(crate) const LONG_FUNCTIONS: &str = "xtask/tidy-long-functions.txt";

/// The most named fields a struct of [`STRUCT_LIMITED`] may have (issue 43).
pub(crate) const MAX_STRUCT_FIELDS: usize = 20;

/// The packages whose structs [`MAX_STRUCT_FIELDS`] limits.
const STRUCT_LIMITED: [&str; 2] = [BINARY, "agentloop-session"];

/// The allow-list of larger structs, as [`LONG_FUNCTIONS`]: `PATH NAME FIELDS`.
pub(crate) const LARGE_STRUCTS: &str = "xtask/tidy-large-structs.txt";

/// The binary's package.
const BINARY: &str = "agent";

/// The most lines the binary's sources may have outside tests (issue 43): every line of its
/// `.rs` files, comments and blank lines included, less the `#[cfg(test)]` and `#[test]`
/// items.
pub(crate) const MAX_BINARY_LINES: usize = 5_000;

/// The file holding the dependency rules, relative to the workspace root.
const ARCHITECTURE: &str = "docs/ARCHITECTURE.md";

/// Runs every check and prints each problem; an error when there is one.
pub(crate) fn run(root: &Path, metadata: &Value) -> Result<()> {
    let packages = packages(metadata)?;
    let mut problems = Vec::new();
    let rules = dependency_rules(&root.join(ARCHITECTURE))?;
    problems.extend(layering(&packages, &rules));
    for package in &packages {
        problems.extend(unused_dependencies(package)?);
        problems.extend(missing_docs(package)?);
    }
    let scanned = scan(root, &packages)?;
    problems.extend(long_functions(root, &scanned)?);
    problems.extend(large_structs(root, &scanned)?);
    let binary_lines = binary_lines(&scanned);
    problems.extend(thin_binary(binary_lines));
    if problems.is_empty() {
        println!(
            "tidy: {} crates: layering, dependencies, docs, function lengths, struct sizes and the binary's size ({binary_lines} lines outside tests) are in order",
            packages.len()
        );
        return Ok(());
    }
    for problem in &problems {
        println!("tidy: {problem}");
    }
    bail!("{} problem(s)", problems.len())
}

/// One workspace package, as `cargo metadata` describes it.
struct Package {
    name: String,
    dir: PathBuf,
    dependencies: Vec<Dependency>,
    /// The root file of its library target, if it has one.
    lib: Option<PathBuf>,
}

/// One declared dependency.
struct Dependency {
    /// The package's name (`sse-parser`).
    package: String,
    /// The name the code uses (`sse_parser`, or the rename).
    ident: String,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Normal,
    Dev,
    Build,
}

fn packages(metadata: &Value) -> Result<Vec<Package>> {
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .context("cargo metadata without workspace_members")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut packages = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let id = package["id"].as_str().unwrap_or_default();
        if !members.contains(id) {
            continue;
        }
        let name = package["name"].as_str().unwrap_or_default().to_owned();
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest
            .parent()
            .with_context(|| format!("{} has no folder", manifest.display()))?
            .to_path_buf();
        let dependencies = package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|dependency| {
                let package = dependency["name"].as_str().unwrap_or_default().to_owned();
                let ident = dependency["rename"]
                    .as_str()
                    .unwrap_or(&package)
                    .replace('-', "_");
                let kind = match dependency["kind"].as_str() {
                    Some("dev") => Kind::Dev,
                    Some("build") => Kind::Build,
                    _ => Kind::Normal,
                };
                Dependency {
                    package,
                    ident,
                    kind,
                }
            })
            .collect();
        let lib = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|target| {
                target["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|kind| kind == "lib"))
            })
            .and_then(|target| target["src_path"].as_str())
            .map(PathBuf::from);
        packages.push(Package {
            name,
            dir,
            dependencies,
            lib,
        });
    }
    Ok(packages)
}

/// The rules of the `tidy:dependencies` block: crate name to the workspace crates it may
/// depend on.
fn dependency_rules(architecture: &Path) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let text = std::fs::read_to_string(architecture)
        .with_context(|| format!("reading {}", architecture.display()))?;
    let block = text
        .split("```text tidy:dependencies\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .with_context(|| {
            format!(
                "{} has no ```text tidy:dependencies block",
                architecture.display()
            )
        })?;
    let mut rules = BTreeMap::new();
    for line in block.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let Some((krate, allowed)) = line.split_once(':') else {
            bail!(
                "{}: `{line}` is not `crate: allowed crates`",
                architecture.display()
            );
        };
        rules.insert(
            krate.trim().to_owned(),
            allowed.split_whitespace().map(str::to_owned).collect(),
        );
    }
    Ok(rules)
}

fn layering(packages: &[Package], rules: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let ours: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut problems = Vec::new();
    for package in packages {
        let Some(allowed) = rules.get(&package.name) else {
            problems.push(format!(
                "{}: not in the tidy:dependencies block of {ARCHITECTURE}",
                package.name
            ));
            continue;
        };
        for dependency in &package.dependencies {
            let internal = ours.contains(dependency.package.as_str());
            if internal && dependency.kind == Kind::Normal && !allowed.contains(&dependency.package)
            {
                problems.push(format!(
                    "{} depends on {}, which {ARCHITECTURE} does not allow (tidy:dependencies)",
                    package.name, dependency.package
                ));
            }
        }
    }
    problems
}

fn unused_dependencies(package: &Package) -> Result<Vec<String>> {
    let source = |dirs: &[&str]| -> Result<String> {
        let mut text = String::new();
        for dir in dirs {
            for file in rust_files(&package.dir.join(dir))? {
                text.push_str(&std::fs::read_to_string(&file)?);
                text.push('\n');
            }
        }
        let build = package.dir.join("build.rs");
        if build.is_file() {
            text.push_str(&std::fs::read_to_string(build)?);
        }
        Ok(text)
    };
    let library = source(&["src"])?;
    let everything = source(&["src", "tests", "benches", "examples"])?;
    let mut problems = Vec::new();
    for dependency in &package.dependencies {
        let text = match dependency.kind {
            Kind::Normal | Kind::Build => &library,
            Kind::Dev => &everything,
        };
        // A dev-dependency may be used by a doctest: doc comments count for those.
        let doctests = dependency.kind == Kind::Dev;
        if !names(text, &dependency.ident, doctests) {
            let kind = match dependency.kind {
                Kind::Normal => "dependency",
                Kind::Dev => "dev-dependency",
                Kind::Build => "build-dependency",
            };
            let hint = if dependency.kind == Kind::Normal
                && names(&everything, &dependency.ident, false)
            {
                " outside its tests, benches and examples (make it a dev-dependency)"
            } else {
                ""
            };
            problems.push(format!(
                "{}: the {kind} {} is not used{hint}",
                package.name, dependency.package
            ));
        }
    }
    Ok(problems)
}

/// Whether Rust source `text` names the crate `ident` as code does: `ident::`, `use ident`,
/// `extern crate ident`, or in a derive or attribute path; with `doctests`, also in the
/// code of doc comments (`///`, `//!`), which doctests compile.
fn names(text: &str, ident: &str, doctests: bool) -> bool {
    text.match_indices(ident).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = &text[at + ident.len()..];
        let starts = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let before_on_line = &text[line_start..at];
        let doc = ["///", "//!"]
            .iter()
            .any(|marker| before_on_line.trim_start().starts_with(marker));
        let in_comment = before_on_line.contains("//") && !(doctests && doc);
        starts
            && !in_comment
            && (after.starts_with("::")
                || (text[..at].ends_with("use ") || text[..at].ends_with("crate "))
                    && after.starts_with([';', ' ', ':', '\n']))
    })
}

fn missing_docs(package: &Package) -> Result<Vec<String>> {
    let Some(lib) = &package.lib else {
        return Ok(Vec::new());
    };
    let text =
        std::fs::read_to_string(lib).with_context(|| format!("reading {}", lib.display()))?;
    Ok(if text.contains("#![deny(missing_docs)]") {
        Vec::new()
    } else {
        vec![format!(
            "{}: {} does not say #![deny(missing_docs)]",
            package.name,
            lib.display()
        )]
    })
}

/// The `.rs` files below `dir` (none when it does not exist), sorted.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// One source file of a package's library or binary, measured.
struct Scanned {
    /// The package's name.
    package: String,
    /// The path from the workspace root.
    file: String,
    /// Every line of the file.
    lines: usize,
    /// Its functions, structs and test lines.
    lengths: Lengths,
}

/// Parses every file under each package's `src/`.
fn scan(root: &Path, packages: &[Package]) -> Result<Vec<Scanned>> {
    let mut scanned = Vec::new();
    for package in packages {
        for file in rust_files(&package.dir.join("src"))? {
            let relative = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&file)?;
            let parsed =
                syn::parse_file(&text).with_context(|| format!("parsing {}", file.display()))?;
            let mut lengths = Lengths::default();
            lengths.visit_file(&parsed);
            scanned.push(Scanned {
                package: package.name.clone(),
                file: relative,
                lines: text.lines().count(),
                lengths,
            });
        }
    }
    Ok(scanned)
}

/// The lines of [`BINARY`]'s sources outside tests.
fn binary_lines(scanned: &[Scanned]) -> usize {
    scanned
        .iter()
        .filter(|file| file.package == BINARY)
        .map(|file| file.lines - file.lengths.test_lines)
        .sum()
}

/// The binary stays thin: at most [`MAX_BINARY_LINES`] lines outside tests in [`BINARY`].
fn thin_binary(lines: usize) -> Vec<String> {
    if lines > MAX_BINARY_LINES {
        vec![format!(
            "{BINARY}: {lines} lines outside tests (at most {MAX_BINARY_LINES}): what a session is belongs in the session library"
        )]
    } else {
        Vec::new()
    }
}

/// No struct in the binary or the session library has more than [`MAX_STRUCT_FIELDS`]
/// named fields, except those in [`LARGE_STRUCTS`], which may only shrink.
fn large_structs(root: &Path, scanned: &[Scanned]) -> Result<Vec<String>> {
    let found: BTreeMap<(String, String), usize> = scanned
        .iter()
        .filter(|file| STRUCT_LIMITED.contains(&file.package.as_str()))
        .flat_map(|file| {
            file.lengths
                .structs
                .iter()
                .filter(|(_, fields)| *fields > MAX_STRUCT_FIELDS)
                .map(|(name, fields)| ((file.file.clone(), name.clone()), *fields))
        })
        .collect();
    let listed = allow_list(&root.join(LARGE_STRUCTS))?;
    Ok(over_limit(
        &found,
        &listed,
        LARGE_STRUCTS,
        MAX_STRUCT_FIELDS,
        "fields",
        "split it into named parts",
    ))
}

fn long_functions(root: &Path, scanned: &[Scanned]) -> Result<Vec<String>> {
    let mut long = BTreeMap::new();
    for file in scanned {
        for (name, lines) in &file.lengths.found {
            if *lines > MAX_FUNCTION_LINES {
                long.insert((file.file.clone(), name.clone()), *lines);
            }
        }
    }
    let listed = allow_list(&root.join(LONG_FUNCTIONS))?;
    Ok(over_limit(
        &long,
        &listed,
        LONG_FUNCTIONS,
        MAX_FUNCTION_LINES,
        "lines",
        "split it into named steps",
    ))
}

/// The problems of `found` (each item over `limit`, in `unit`s) against the allow-list
/// `listed` read from `list`: an item not listed, one that grew, one that shrank (the list
/// must follow), and an entry whose item is no longer over the limit.
fn over_limit(
    found: &BTreeMap<(String, String), usize>,
    listed: &BTreeMap<(String, String), usize>,
    list: &str,
    limit: usize,
    unit: &str,
    advice: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for ((file, name), size) in found {
        match listed.get(&(file.clone(), name.clone())) {
            None => problems.push(format!(
                "{file}: {name} has {size} {unit} (at most {limit}): {advice}"
            )),
            Some(allowed) if size > allowed => problems.push(format!(
                "{file}: {name} grew to {size} {unit} ({list} allows {allowed}, and the list may only shrink)"
            )),
            Some(allowed) if size < allowed => problems.push(format!(
                "{file}: {name} has {size} {unit} now: write `{file} {name} {size}` in {list} (it was {allowed})"
            )),
            Some(_) => {}
        }
    }
    for ((file, name), allowed) in listed {
        if !found.contains_key(&(file.clone(), name.clone())) {
            problems.push(format!(
                "{list}: {file} {name} {allowed} is no longer over {limit} {unit} (or gone): remove the entry"
            ));
        }
    }
    problems
}

/// The allow-list: `(file, name)` to the lines allowed.
fn allow_list(path: &Path) -> Result<BTreeMap<(String, String), usize>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut listed = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [file, name, lines] = fields[..] else {
            bail!(
                "{}:{}: `{line}` is not `PATH NAME LINES`",
                path.display(),
                number + 1
            );
        };
        let lines = lines.parse().with_context(|| {
            format!(
                "{}:{}: `{lines}` is not a number",
                path.display(),
                number + 1
            )
        })?;
        listed.insert((file.to_owned(), name.to_owned()), lines);
    }
    Ok(listed)
}

/// Collects the length of every function outside `#[cfg(test)]` and `#[test]` items, the
/// named fields of every struct, and the lines test-only items take.
#[derive(Default)]
struct Lengths {
    /// The type of the `impl` being visited.
    self_type: Option<String>,
    found: Vec<(String, usize)>,
    /// Each struct with named fields and how many it has.
    structs: Vec<(String, usize)>,
    /// The lines of test-only items (outermost ones: a test module counts once).
    test_lines: usize,
}

/// The lines `item` spans, from its first attribute to its end.
fn item_lines(attrs: &[syn::Attribute], item: &impl Spanned) -> usize {
    let start = attrs
        .first()
        .map_or_else(|| item.span().start().line, |attr| attr.span().start().line);
    item.span().end().line + 1 - start
}

impl Lengths {
    fn record(&mut self, name: &syn::Ident, start: proc_macro2::Span, block: &syn::Block) {
        let lines = block.span().end().line + 1 - start.start().line;
        let name = match &self.self_type {
            Some(ty) => format!("{ty}::{name}"),
            None => name.to_string(),
        };
        self.found.push((name, lines));
    }
}

/// Whether `attrs` mark a test-only item (`#[cfg(test)]`, `#[test]`, `#[tokio::test]`).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        let cfg_test = path.is_ident("cfg")
            && attr
                .meta
                .require_list()
                .is_ok_and(|list| list.tokens.to_string().trim() == "test");
        let test = path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "test");
        cfg_test || test
    })
}

impl<'ast> Visit<'ast> for Lengths {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if test_only(&item.attrs) {
            self.test_lines += item_lines(&item.attrs, item);
        } else {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_struct(&mut self, item: &'ast syn::ItemStruct) {
        if test_only(&item.attrs) {
            self.test_lines += item_lines(&item.attrs, item);
            return;
        }
        if let syn::Fields::Named(fields) = &item.fields {
            self.structs
                .push((item.ident.to_string(), fields.named.len()));
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if test_only(&item.attrs) {
            self.test_lines += item_lines(&item.attrs, item);
            return;
        }
        let outer = self.self_type.take();
        self.record(&item.sig.ident, item.sig.fn_token.span, &item.block);
        syn::visit::visit_item_fn(self, item);
        self.self_type = outer;
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if test_only(&item.attrs) {
            self.test_lines += item_lines(&item.attrs, item);
            return;
        }
        let outer = self.self_type.take();
        self.self_type = match &*item.self_ty {
            syn::Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        syn::visit::visit_item_impl(self, item);
        self.self_type = outer;
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if test_only(&item.attrs) {
            return;
        }
        self.record(&item.sig.ident, item.sig.fn_token.span, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(block) = &item.default
            && !test_only(&item.attrs)
        {
            self.record(&item.sig.ident, item.sig.fn_token.span, block);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_names_are_found_as_code_names_them() {
        assert!(names("use sse_parser::Framer;", "sse_parser", false));
        assert!(names("let x = thiserror::Error;", "thiserror", false));
        assert!(names("extern crate libc;", "libc", false));
        assert!(!names(
            "// sse_parser::Framer in a comment",
            "sse_parser",
            false
        ));
        assert!(!names("my_sse_parser::x", "sse_parser", false));
        assert!(!names("let sse_parser = 1;", "sse_parser", false));
        // A doctest's code counts for a dev-dependency only.
        assert!(names(
            "//! let s = testkit::Server::start();",
            "testkit",
            true
        ));
        assert!(!names(
            "//! let s = testkit::Server::start();",
            "testkit",
            false
        ));
        assert!(!names(
            "// let s = testkit::Server::start();",
            "testkit",
            true
        ));
    }

    #[test]
    fn lengths_skip_tests_and_name_methods() {
        let text = "fn a() {\n}\nimpl S {\n    fn b(&self) {\n        1;\n    }\n}\n#[cfg(test)]\nmod tests {\n    fn c() {}\n}\n#[test]\nfn d() {}\n";
        let parsed = syn::parse_file(text).unwrap_or_else(|_| syn::File {
            shebang: None,
            attrs: Vec::new(),
            items: Vec::new(),
        });
        let mut lengths = Lengths::default();
        lengths.visit_file(&parsed);
        assert_eq!(
            lengths.found,
            vec![("a".to_owned(), 2), ("S::b".to_owned(), 3)]
        );
    }
}
