//! Schema migrations, recorded per component (`checkpoint`, `store`) in the table `weft_migrations`.

/// One step of a component's schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    /// Its number; steps run in order and each runs once.
    pub(crate) version: i64,
    /// What it does (recorded with it).
    pub(crate) name: &'static str,
    /// The statements.
    pub(crate) sql: &'static str,
}

/// The steps of `all` not in `applied`, in order; an error when the database holds a step this build
/// does not know (a newer weft migrated it).
pub(crate) fn pending<'a>(
    component: &str,
    all: &'a [Migration],
    applied: &[i64],
) -> Result<Vec<&'a Migration>, String> {
    let known = all.iter().map(|m| m.version).max().unwrap_or(0);
    if let Some(newer) = applied.iter().copied().filter(|v| *v > known).max() {
        return Err(format!(
            "the database has {component} schema version {newer}; this build knows versions up to {known} \
             (a newer weft migrated it)"
        ));
    }
    Ok(all.iter().filter(|m| !applied.contains(&m.version)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Migration; 2] =
        [Migration { version: 1, name: "one", sql: "" }, Migration { version: 2, name: "two", sql: "" }];

    #[test]
    fn applies_what_is_missing_in_order() {
        let todo: Vec<i64> = pending("checkpoint", &ALL, &[1]).unwrap().iter().map(|m| m.version).collect();
        assert_eq!(todo, vec![2]);
        assert_eq!(pending("checkpoint", &ALL, &[]).unwrap().len(), 2);
    }

    #[test]
    fn refuses_a_schema_from_a_newer_build() {
        let err = pending("store", &ALL, &[1, 2, 3]).unwrap_err();
        assert!(err.contains("store schema version 3") && err.contains("up to 2"), "{err}");
    }
}
