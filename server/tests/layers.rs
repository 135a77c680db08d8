//! The server's shape, checked from its source (docs/ARCHITECTURE.md, "The server's
//! layers"): every `crate::`, `super::` and `self::` path in every file of server/src names a
//! module, and
//!
//! 1. the modules' imports form no cycle;
//! 2. imports go one way between the layers: the core (`core/`) imports only itself and
//!    `config`; the network layer (`net/`) only the core and itself; a protocol adapter
//!    (`resp/`, `memcache/`, `binary/`) the core, the network layer's session trait and
//!    itself, never another adapter; the admin endpoint (`admin/`) only the core; the
//!    cluster (`cluster/`) anything but the network layer; the root (`lib.rs`) wires them;
//! 3. no function is longer than `MAX_FN_LINES` lines;
//! 4. the shared state (`core/shared.rs`) has no public fields;
//! 5. the protocol adapters reach the core through its doors only (`core/write_door.rs`,
//!    `core/read_door.rs`, a loop's `Reads`): no adapter takes the station, the store, the
//!    engine or the durability layer from the shared state.
//!
//! A path is read from the source text (`use` lines and paths in code alike; `crate::`,
//! `super::` and `self::` paths, resolved from the file's module or the inline module they
//! sit in), so a check cannot be dodged by writing a path out in full or relative.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FN_LINES: usize = 100;

/// Every .rs file under `dir`, with its module path (`core::shared`, `resp`, `lib`).
fn modules(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p: PathBuf = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(dir).unwrap().with_extension("");
                let mut parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if parts.last().is_some_and(|l| l == "mod") {
                    parts.pop();
                }
                out.insert(parts.join("::"), std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    out
}

/// The source without comments (so a path in prose is not an import).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The inline modules (`mod tests { … }`) open across `code`: each byte offset where the
/// set changes, with the names of the inline modules around the bytes from there on,
/// outermost first (see [`inline_at`]). String and character literals are skipped, so a
/// brace inside one does not count.
fn inline_mods(code: &str) -> Vec<(usize, Vec<String>)> {
    let b = code.as_bytes();
    let mut out = vec![(0, Vec::new())];
    let mut open: Vec<(String, usize)> = Vec::new();
    let (mut depth, mut i) = (0usize, 0usize);
    let mut pending: Option<String> = None;
    while i < b.len() {
        let here = open.len();
        let step = match b[i] {
            b'"' => {
                // A string literal: to its closing quote, past escapes.
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                j + 1 - i
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => 3,
            b'\'' if b.get(i + 1) == Some(&b'\\') && b.get(i + 3) == Some(&b'\'') => 4,
            b'{' => {
                depth += 1;
                if let Some(name) = pending.take() {
                    open.push((name, depth));
                }
                1
            }
            b'}' => {
                if open.last().is_some_and(|(_, d)| *d == depth) {
                    open.pop();
                }
                depth = depth.saturating_sub(1);
                1
            }
            b';' => {
                pending = None; // `mod x;` declares a file, not an inline module
                1
            }
            _ if b[i..].starts_with(b"mod ")
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let name: String = b[i + 4..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                    .map(|&c| c as char)
                    .collect();
                pending = Some(name);
                4
            }
            _ => 1,
        };
        i += step.min(b.len() - i);
        if open.len() != here {
            out.push((i, open.iter().map(|(n, _)| n.clone()).collect()));
        }
    }
    out
}

/// The inline modules around byte `at`, from [`inline_mods`]'s change points.
fn inline_at(mods: &[(usize, Vec<String>)], at: usize) -> &[String] {
    let i = mods.partition_point(|(from, _)| *from <= at);
    &mods[i - 1].1
}

/// The modules `m`'s source names by `crate::…`, `super::…` and `self::…` paths (also
/// inside `use …::{…}` groups; `super::` and `self::` resolved from the module, or from the
/// inline module they are written in), each resolved to the longest module that exists.
fn imports(m: &str, text: &str, all: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let code = code(text);
    let inline = inline_mods(&code);
    let mut paths: Vec<String> = Vec::new();
    let b = code.as_bytes();
    for start in 0..code.len() {
        let prefix = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|p| b[start..].starts_with(p.as_bytes()));
        let Some(prefix) = prefix else { continue };
        if start > 0
            && (b[start - 1].is_ascii_alphanumeric()
                || b[start - 1] == b'_'
                || b[start - 1] == b':')
        {
            continue; // inside a longer path (`a::super::`) or a word (`myself::`)
        }
        // The module the path starts from.
        let mut base: Vec<String> = if prefix == "crate::" {
            Vec::new()
        } else {
            let mut v: Vec<String> = m.split("::").map(str::to_string).collect();
            v.extend(inline_at(&inline, start).iter().cloned());
            v
        };
        let mut rest = &code[start + prefix.len()..];
        if prefix == "super::" {
            base.pop();
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '{'))
            .unwrap_or(rest.len());
        let p = &rest[..end];
        let base = base.join("::");
        let join = |tail: &str| match (base.is_empty(), tail.is_empty()) {
            (true, _) => tail.to_string(),
            (false, true) => base.clone(),
            (false, false) => format!("{base}::{tail}"),
        };
        match p.find('{') {
            // `crate::a::{b, c::d}`: each item of the group.
            Some(g) => {
                let head = &p[..g];
                let close = rest.find('}').unwrap_or(rest.len());
                for item in rest[g + 1..close].split(',') {
                    let item: String = item.chars().filter(|c| !c.is_whitespace()).collect();
                    paths.push(join(&format!("{head}{item}")));
                }
            }
            None => paths.push(join(p.trim_end_matches(':'))),
        }
    }
    for p in paths {
        let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
        for n in (1..=segs.len()).rev() {
            let cand = segs[..n].join("::");
            if all.contains_key(&cand) {
                if cand != m {
                    out.insert(cand);
                }
                break;
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = modules(&dir);
    all.iter()
        .map(|(m, t)| (m.clone(), imports(m, t, &all)))
        .collect()
}

/// The layer a module is in: its top folder, or the file's name at the top.
fn layer(m: &str) -> &str {
    m.split("::").next().unwrap()
}

/// Whether module `from` may import module `to`.
fn allowed(from: &str, to: &str) -> bool {
    let (lf, lt) = (layer(from), layer(to));
    if lf == lt || lt == "config" {
        return true;
    }
    match lf {
        "core" | "config" => false,
        "net" => lt == "core",
        "resp" | "memcache" | "binary" => lt == "core" || to == "net::session",
        "admin" => lt == "core",
        "cluster" => lt != "net" || to == "net::session",
        _ => true, // lib, main: the composition root
    }
}

#[test]
fn imports_go_one_way_between_layers() {
    let g = graph();
    assert!(g.contains_key("core::shared") && g.contains_key("resp::dispatch"));
    let bad: Vec<String> = g
        .iter()
        .flat_map(|(m, deps)| {
            deps.iter()
                .filter(|d| !allowed(m, d))
                .map(move |d| format!("{m} -> {d}"))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "imports against the layers:\n{}",
        bad.join("\n")
    );
}

#[test]
fn modules_import_no_cycle() {
    let g = graph();
    // Depth-first search for a back edge; report the cycle it closes.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|x| x == d).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(d, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(m, &g, &mut state, &mut Vec::new()) {
                panic!("import cycle: {}", c.join(" -> "));
            }
        }
    }
}

/// Each function's name and length in lines (from its `fn` line to the closing brace at
/// the same indentation).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = l.len() - t.len();
        let t = t
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ")
            .trim_start_matches("const ")
            .trim_start_matches("unsafe ");
        let Some(rest) = t.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{}}}", " ".repeat(indent));
        // A declaration without a body (a trait's) ends with `;` before any `{`.
        let body = lines[i..]
            .iter()
            .position(|x| x.contains('{') || x.trim_end().ends_with(';'))
            .unwrap_or(0);
        if lines[i + body].trim_end().ends_with(';') && !lines[i + body].contains('{') {
            continue;
        }
        if lines[i + body].trim_end().ends_with('}') && lines[i + body].contains('{') {
            continue; // one line
        }
        if let Some(end) = lines[i + 1..]
            .iter()
            .position(|x| x.starts_with(&close) && x.trim() == "}")
        {
            out.push((name, i + 1, end + 2));
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_a_screen_or_two() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut long = Vec::new();
    for (m, text) in modules(&dir) {
        for (name, line, len) in functions(&text) {
            if len > MAX_FN_LINES {
                long.push(format!("{m}::{name} (line {line}): {len} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The core's internals `Shared` hands out, which the adapters may not take: the station,
/// the store, the read engine, the durability layer.
const INTERNALS: [&str; 4] = [".station()", ".store()", ".engine()", ".persist()"];

/// Where `text`'s code (comments left out) takes one of [`INTERNALS`]: line and call.
fn internal_calls(text: &str) -> Vec<(usize, &'static str)> {
    let code = code(text);
    let mut found = Vec::new();
    for (i, l) in code.lines().enumerate() {
        for c in INTERNALS {
            if l.contains(c) {
                found.push((i + 1, c));
            }
        }
    }
    found
}

/// The protocol adapters reach the core through its doors only: writes through the write
/// door (`core/write_door.rs`, `Shared::writes`), reads through the read door
/// (`Shared::read` over a loop's `Reads`) and the read-only view of the store
/// (`core/read_door.rs`, `Shared::view`). None is handed the station, the store, the engine
/// or the durability layer.
#[test]
fn adapters_reach_the_core_through_its_doors_only() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for (m, text) in modules(&dir) {
        if matches!(layer(&m), "resp" | "memcache" | "binary") {
            for (line, call) in internal_calls(&text) {
                found.push(format!("{m}: line {line}: {call}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "adapters taking the core's internals: {found:?}"
    );
}

#[test]
fn the_shared_state_has_no_public_fields() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let text = std::fs::read_to_string(dir.join("core/shared.rs")).unwrap();
    let start = text
        .find("pub struct Shared {")
        .expect("Shared is in core/shared.rs");
    let end = start + text[start..].find("\n}").unwrap();
    let public: Vec<&str> = text[start..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| l.starts_with("pub"))
        .collect();
    assert!(public.is_empty(), "public fields on Shared: {public:?}");
}

#[test]
fn the_checks_themselves_catch_what_they_look_for() {
    let door = "let d = sh.writes().run_one(op); // not sh.station() in prose\nlet s = sh\n    .station()\n    .run_one(sh.store(), op);\nlet v = sh.view().get(k);";
    assert_eq!(
        internal_calls(door),
        vec![(3, ".station()"), (4, ".store()")]
    );
    let mut all = BTreeMap::new();
    for m in ["core::shared", "resp", "resp::table", "net::session"] {
        all.insert(m.to_string(), String::new());
    }
    let text = "use crate::resp::table::Spec;\n// crate::net::session in prose\nuse crate::{core::shared::Shared, resp::table};\nfn f() { crate::resp::x(); }";
    let got = imports("core::shared", text, &all);
    let want: BTreeSet<String> = ["resp::table", "resp"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(got, want);
    // Relative paths: `super::` from a file's module and from an inline module, `self::`,
    // groups, and braces inside literals that must not confuse the inline modules.
    let mut all2 = all.clone();
    for m in [
        "core",
        "core::ops",
        "core::ops::item",
        "core::ops::write",
        "core::ops::vector",
    ] {
        all2.insert(m.to_string(), String::new());
    }
    let text = "use super::write::{Effect, Outcome};\nfn f() { let _ = '{'; let _ = \"}}\"; super::super::shared::x(); }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use self::inner::y;\n}\nfn g() { super::vector::z(); }";
    let got = imports("core::ops::item", text, &all2);
    let want: BTreeSet<String> = ["core::ops::write", "core::shared", "core::ops::vector"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(got, want);
    assert!(!allowed("core::shared", "resp::table"));
    assert!(!allowed("resp::dispatch", "memcache"));
    assert!(!allowed("net::event_loop", "resp::session"));
    assert!(allowed("resp::session", "net::session"));
    let long = format!(
        "fn big() {{\n{}}}\nfn small() {{\n    1\n}}\n",
        "    x();\n".repeat(150)
    );
    let f = functions(&long);
    assert_eq!(f[0].0, "big");
    assert!(f[0].2 > MAX_FN_LINES);
    assert_eq!(f[1], ("small".to_string(), 153, 3));
}
