//! Which path the generated code uses to reach a weft crate: the crate itself, or its re-export in the
//! `weft` facade when the calling crate depends on the facade only.

/// The dependency keys under which a calling crate reaches the facade as `::weft`: its usual key, and
/// its package name on crates.io (whose library is named `weft`).
const FACADE_KEYS: [&str; 2] = ["weft", "weft-llm"];

/// Whether a Cargo manifest declares a dependency named `name` (`name = ...`, `name.workspace = true`,
/// `[dependencies.name]`). A plain text scan: enough to tell the facade from the crates it re-exports.
pub(crate) fn declares_dependency(manifest: &str, name: &str) -> bool {
    manifest.lines().map(str::trim).any(|line| {
        let key = line.strip_prefix(name).is_some_and(|rest| rest.starts_with([' ', '=', '.']));
        let table = line.starts_with('[') && line.ends_with(&format!(".{name}]"));
        key || table
    })
}

/// Whether a manifest declares the facade under a key that code spells `weft`.
fn depends_on_facade(manifest: &str) -> bool {
    FACADE_KEYS.iter().any(|key| declares_dependency(manifest, key))
}

/// The path of the crate `package` (named `direct` in code) as the calling crate sees it: `direct`,
/// or `through_facade` when the calling crate depends on the `weft` facade and not on `package`.
pub(crate) fn default_path(package: &str, direct: syn::Path, through_facade: syn::Path) -> syn::Path {
    if std::env::var("CARGO_PKG_NAME").is_ok_and(|name| name == package) {
        return direct;
    }
    let manifest = std::env::var("CARGO_MANIFEST_DIR")
        .ok()
        .and_then(|dir| std::fs::read_to_string(std::path::Path::new(&dir).join("Cargo.toml")).ok());
    match manifest {
        Some(m) if !declares_dependency(&m, package) && depends_on_facade(&m) => through_facade,
        _ => direct,
    }
}

#[cfg(test)]
mod tests {
    use super::{declares_dependency, depends_on_facade};

    #[test]
    fn dependency_scan_recognises_the_forms_cargo_accepts() {
        let manifest = "[package]\nname = \"app\"\n\n[dependencies]\nweft.workspace = true\nserde = \"1\"\n";
        assert!(declares_dependency(manifest, "weft"));
        assert!(!declares_dependency(manifest, "weft-runnable-core"));
        assert!(!declares_dependency(manifest, "weft-graph"));
        assert!(declares_dependency(
            "[dependencies]\nweft-runnable-core = { path = \"x\" }",
            "weft-runnable-core"
        ));
        assert!(declares_dependency("[dev-dependencies.weft]\npath = \"..\"", "weft"));
        assert!(!declares_dependency("[dependencies]\nweft-graph = \"0.1\"", "weft"));
    }

    #[test]
    fn the_facade_is_found_under_its_key_or_its_package_name() {
        assert!(depends_on_facade("[dependencies]\nweft = { package = \"weft-llm\", version = \"0.1\" }"));
        assert!(depends_on_facade("[dependencies]\nweft-llm = \"0.1\""));
        assert!(!depends_on_facade("[dependencies]\nweft-graph = \"0.1\""));
    }
}
