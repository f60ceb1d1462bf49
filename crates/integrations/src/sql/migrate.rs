//! Schema migrations, recorded per component (`checkpoint`, `store`) in the table `weft_migrations`.
//!
//! Each step says which older builds still work on a database it was applied to (`readable_from`), and
//! the table records it with the step. A build that finds steps newer than it knows goes on when every
//! one of them says it can (a rolling upgrade, or a rollback after one, runs older instances beside a
//! migrated database), and refuses to start, naming the step, when one does not.

/// One step of a component's schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    /// Its number; steps run in order and each runs once.
    pub(crate) version: i64,
    /// What it does (recorded with it).
    pub(crate) name: &'static str,
    /// The statements.
    pub(crate) sql: &'static str,
    /// The oldest build that works on a database with this step applied, as the highest step it knows:
    /// `version - 1` for a step older builds never notice (a function, an index or a column nothing
    /// older reads; a function replaced with the same signature and results), `version` for one they
    /// would misuse.
    pub(crate) readable_from: i64,
}

/// One applied step, as the table records it: its number, and the oldest build it left working (`None`
/// for steps recorded before the table had the column: only builds that know them).
pub(crate) type Applied = (i64, Option<i64>);

/// The steps of `all` not in `applied`, in order; an error when the database holds a step this build
/// does not know and that does not leave builds as old as this one working (a newer weft migrated it).
pub(crate) fn pending<'a>(
    component: &str,
    all: &'a [Migration],
    applied: &[Applied],
) -> Result<Vec<&'a Migration>, String> {
    let known = all.iter().map(|m| m.version).max().unwrap_or(0);
    let refusing = applied
        .iter()
        .filter(|(version, readable_from)| *version > known && readable_from.unwrap_or(*version) > known)
        .max_by_key(|(version, _)| *version);
    if let Some((newer, readable_from)) = refusing {
        let needs = readable_from.unwrap_or(*newer);
        return Err(format!(
            "the database has {component} schema version {newer}, which needs a build that knows versions up \
             to {needs} at least; this build knows versions up to {known} (a newer weft migrated it)"
        ));
    }
    Ok(all.iter().filter(|m| !applied.iter().any(|(version, _)| *version == m.version)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Migration; 2] = [
        Migration { version: 1, name: "one", sql: "", readable_from: 0 },
        Migration { version: 2, name: "two", sql: "", readable_from: 1 },
    ];

    #[test]
    fn applies_what_is_missing_in_order() {
        let todo: Vec<i64> =
            pending("checkpoint", &ALL, &[(1, Some(0))]).unwrap().iter().map(|m| m.version).collect();
        assert_eq!(todo, vec![2]);
        assert_eq!(pending("checkpoint", &ALL, &[]).unwrap().len(), 2);
        assert!(pending("checkpoint", &ALL, &[(1, None), (2, None)]).unwrap().is_empty());
    }

    #[test]
    fn refuses_a_schema_from_a_newer_build_that_older_builds_cannot_use() {
        let err = pending("store", &ALL, &[(1, None), (2, None), (3, Some(3))]).unwrap_err();
        assert!(err.contains("store schema version 3") && err.contains("up to 2"), "{err}");
        // Recorded before steps said which builds they leave working: only builds that know it.
        let err = pending("store", &ALL, &[(1, None), (2, None), (3, None)]).unwrap_err();
        assert!(err.contains("version 3, which needs a build that knows versions up to 3"), "{err}");
        // One step among the newer ones that older builds cannot use is enough to refuse.
        let err = pending("store", &ALL, &[(1, None), (2, None), (3, Some(2)), (4, Some(4))]).unwrap_err();
        assert!(err.contains("version 4"), "{err}");
    }

    #[test]
    fn works_on_a_schema_whose_newer_steps_leave_this_build_working() {
        let applied = [(1, None), (2, None), (3, Some(2)), (4, Some(1))];
        assert!(pending("checkpoint", &ALL, &applied).unwrap().is_empty());
        // A newer step that only builds knowing it can use refuses, whatever the steps before it allow.
        assert!(pending("checkpoint", &ALL, &[(1, None), (3, Some(3))]).is_err());
    }
}
