//! The layer rule of every crate (issue 34; `docs/ARCHITECTURE.md` "Tests"): no two files of
//! a crate's `src` import each other, directly or round a circle. Every file is parsed; its
//! references to other modules of the crate — `use crate::…`/`super::…`/`self::…` trees,
//! `crate::`/`super::` paths in code and inside macro calls, and `use` of a child module by
//! its bare name — become edges between files ([`graph`]), and [`cycles`] finds the circles.
//!
//! [`check`] applies the rule with an allow-list of known edges that close a circle today
//! (a crate that predates the rule); an entry no circle needs any more is reported too, so
//! the list can only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module path below the crate root (`["wire", "jsonrpc"]`); the root is `[]`.
type ModPath = Vec<String>;

/// Every module of the crate that lives in its own file, by module path. The root is
/// `lib.rs` when the crate has one (a `main.rs` beside it is then only the binary's
/// entry, which reaches the library by its crate name), else `main.rs`.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut out = BTreeMap::new();
    let root = if src.join("lib.rs").exists() {
        src.join("lib.rs")
    } else {
        src.join("main.rs")
    };
    let mut todo = vec![(ModPath::new(), root)];
    while let Some((path, file)) = todo.pop() {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        // Children of `x.rs` or `x/mod.rs` live in `x/`; of the root next to it.
        let is_root = path.is_empty();
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs") => file.parent().unwrap().to_path_buf(),
            Some("main.rs" | "lib.rs") if is_root => file.parent().unwrap().to_path_buf(),
            _ => file.with_extension(""),
        };
        for item in &ast.items {
            let syn::Item::Mod(m) = item else { continue };
            if m.content.is_some() {
                continue;
            }
            let name = m.ident.to_string();
            let explicit = m.attrs.iter().find_map(|a| match &a.meta {
                syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => Some(s.value()),
                    _ => None,
                },
                _ => None,
            });
            let child = match explicit {
                // `#[path]` is relative to the declaring file's folder.
                Some(p) => file.parent().unwrap().join(p),
                None if dir.join(format!("{name}.rs")).exists() => dir.join(format!("{name}.rs")),
                None => dir.join(&name).join("mod.rs"),
            };
            let mut p = path.clone();
            p.push(name);
            todo.push((p, child));
        }
        out.insert(path, file);
    }
    out
}

/// Collects the module paths one file refers to.
struct Refs<'a> {
    known: &'a BTreeMap<ModPath, PathBuf>,
    /// The module being read (grows inside inline `mod x { … }`).
    here: ModPath,
    found: BTreeSet<ModPath>,
}

impl Refs<'_> {
    /// Resolves a path's segments (as written) to the longest known module prefix.
    fn add(&mut self, segments: &[String], in_use: bool) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut base = match first.as_str() {
            "crate" => ModPath::new(),
            "self" => self.here.clone(),
            "super" => {
                let mut b = self.here.clone();
                b.pop();
                b
            }
            // A bare name in a `use` may be a child module (`use limits::Limits`).
            _ if in_use => {
                let mut b = self.here.clone();
                b.push(first.clone());
                if !self.known.contains_key(&b) {
                    return;
                }
                b.pop();
                b
            }
            _ => return,
        };
        let rest = match first.as_str() {
            "crate" | "self" | "super" => &segments[1..],
            _ => segments,
        };
        let mut rest = rest.iter().peekable();
        // `super::super::x`
        while rest.peek().is_some_and(|s| *s == "super") {
            rest.next();
            base.pop();
        }
        let mut best = base.clone();
        for s in rest {
            base.push(s.clone());
            if self.known.contains_key(&base) {
                best = base.clone();
            }
        }
        // The nearest enclosing module that has a file of its own.
        while !self.known.contains_key(&best) {
            best.pop();
        }
        self.found.insert(best);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.add(prefix, true);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.add(prefix, true);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.add(prefix, true),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// `crate :: a :: b` or `super :: a` chains inside a macro call's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let flat: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < flat.len() {
            match &flat[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if id == "crate" || id == "super" => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    loop {
                        let colons = matches!((flat.get(j), flat.get(j + 1)),
                            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                                if a.as_char() == ':' && b.as_char() == ':');
                        match flat.get(j + 2) {
                            Some(TokenTree::Ident(next)) if colons => {
                                segments.push(next.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if segments.len() > 1 {
                        self.add(&segments, false);
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.add(&segments, false);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.here.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.here.pop();
        }
    }
}

/// File → the files it refers to (self references dropped), by path relative to `src`.
pub fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let known = modules(src);
    let name = |p: &ModPath| known[p].strip_prefix(src).unwrap().display().to_string();
    let mut edges = BTreeMap::new();
    for (path, file) in &known {
        let text = std::fs::read_to_string(file).unwrap();
        let ast = syn::parse_file(&text).unwrap();
        let mut refs = Refs {
            known: &known,
            here: path.clone(),
            found: BTreeSet::new(),
        };
        refs.visit_file(&ast);
        let from = name(path);
        let to: BTreeSet<String> = refs
            .found
            .iter()
            .map(&name)
            .filter(|t| *t != from)
            .collect();
        edges.insert(from, to);
    }
    edges
}

/// Every cycle's files, one strongly connected component each (Tarjan), sorted.
pub fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
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
    s.out
}

/// One allowed edge: `(from, to)`, each a file path relative to `src` (`turn/mod.rs`) or a
/// folder ending in `/` (`turn/`) that covers every file below it.
pub type Allowed<'a> = (&'a str, &'a str);

fn covers(pattern: &str, file: &str) -> bool {
    match pattern.strip_suffix('/') {
        Some(dir) => file.starts_with(pattern) || file == format!("{dir}.rs"),
        None => pattern == file,
    }
}

/// The layer rule on `src` with `allowed` edges taken out: the circles that remain, and
/// the allow-list entries that match no edge inside a circle of the full graph (stale:
/// remove them). Both empty means the rule holds.
pub fn check(src: &Path, allowed: &[Allowed<'_>]) -> (Vec<Vec<String>>, Vec<String>) {
    let edges = graph(src);
    let full = cycles(&edges);
    let in_cycle = |a: &str, b: &str| {
        full.iter()
            .any(|c| c.iter().any(|f| f == a) && c.iter().any(|f| f == b))
    };
    let mut used = vec![false; allowed.len()];
    let mut kept: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in &edges {
        let out = kept.entry(from.clone()).or_default();
        for to in tos {
            let mut excused = false;
            for (i, (pf, pt)) in allowed.iter().enumerate() {
                if covers(pf, from) && covers(pt, to) {
                    excused = true;
                    if in_cycle(from, to) {
                        used[i] = true;
                    }
                }
            }
            if !excused {
                out.insert(to.clone());
            }
        }
    }
    let stale = allowed
        .iter()
        .zip(used)
        .filter(|(_, u)| !u)
        .map(|((f, t), _)| format!("{f} -> {t}"))
        .collect();
    (cycles(&kept), stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_sees_use_trees_macro_paths_super_and_path_attributes() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path();
        let write = |name: &str, text: &str| {
            let p = src.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("main.rs", "mod a;\nmod b;\nmod c;\nmod e;\nfn main() {}\n");
        write("a.rs", "use crate::{b::{self, X}};\n");
        write(
            "b.rs",
            "pub struct X;\npub fn f() { tracing::info!(y = %crate::c::d::Y); }\n",
        );
        write("c/mod.rs", "pub mod d;\n");
        write(
            "c/d.rs",
            "pub struct Y;\nfn g() -> super::super::a::Z { todo!() }\n#[cfg(test)]\n#[path = \"d_tests.rs\"]\nmod tests;\n",
        );
        write("c/d_tests.rs", "use super::*;\n");
        write("e.rs", "mod inner { use super::super::a; }\n");
        let edges = graph(src);
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(edges["a.rs"], set(&["b.rs"]));
        assert_eq!(edges["b.rs"], set(&["c/d.rs"]));
        assert_eq!(edges["c/d.rs"], set(&["a.rs"]));
        assert_eq!(edges["c/d_tests.rs"], set(&["c/d.rs"]));
        assert_eq!(edges["e.rs"], set(&["a.rs"]));
        assert_eq!(edges["c/mod.rs"], set(&[]));
        assert_eq!(cycles(&edges), vec![vec!["a.rs", "b.rs", "c/d.rs"]]);
    }

    #[test]
    fn the_cycle_finder_finds_cycles() {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut edge = |a: &str, b: &str| {
            edges.entry(a.into()).or_default().insert(b.into());
            edges.entry(b.into()).or_default();
        };
        edge("a.rs", "b.rs");
        edge("b.rs", "c.rs");
        edge("c.rs", "a.rs");
        edge("c.rs", "d.rs");
        edge("e.rs", "d.rs");
        assert_eq!(cycles(&edges), vec![vec!["a.rs", "b.rs", "c.rs"]]);
    }

    #[test]
    fn a_lib_root_and_the_allow_list_shrink_only() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path();
        let write = |name: &str, text: &str| {
            let p = src.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("lib.rs", "pub mod a;\npub mod b;\n");
        write("main.rs", "fn main() {}\n");
        write("a.rs", "use crate::b::c::Z;\npub struct Y;\n");
        write("b/mod.rs", "pub mod c;\npub struct X;\n");
        write("b/c.rs", "use crate::a::Y;\npub struct Z;\n");
        let (left, stale) = check(src, &[]);
        assert_eq!(left, vec![vec!["a.rs", "b/c.rs"]]);
        assert!(stale.is_empty());
        let (left, stale) = check(src, &[("b/", "a.rs")]);
        assert!(left.is_empty(), "{left:?}");
        assert!(stale.is_empty(), "{stale:?}");
        let (left, stale) = check(src, &[("b/", "a.rs"), ("a.rs", "lib.rs")]);
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(stale, vec!["a.rs -> lib.rs"]);
    }
}
