#!/bin/sh
# dbt needs a profile naming the warehouse; a CI job's points at the CI's. For
# every dbt project in the working directory (two levels deep) whose profile
# is not defined by the project itself, write a DuckDB profile whose database
# lives in /tmp: a tmpfs that is fresh for every step container, so no run sees
# an earlier run's tables.
set -eu
if [ -z "${DBT_PROFILES_DIR:-}" ]; then
    profiles="${HOME:-/tmp}/.dbt/profiles.yml"
    for project in dbt_project.yml */dbt_project.yml */*/dbt_project.yml; do
        [ -f "$project" ] || continue
        [ -f "$(dirname "$project")/profiles.yml" ] && continue
        name=$(sed -n "s/^profile:[[:space:]]*[\"']\{0,1\}\([A-Za-z0-9_-]*\).*/\1/p" "$project" | head -n 1)
        [ -n "$name" ] || continue
        if [ ! -f "$profiles" ] || ! grep -q "^$name:" "$profiles"; then
            mkdir -p "$(dirname "$profiles")" /tmp/patchheal-dbt
            printf '%s:\n  target: patchheal\n  outputs:\n    patchheal:\n      type: duckdb\n      path: /tmp/patchheal-dbt/%s.duckdb\n      threads: 1\n' \
                "$name" "$name" >> "$profiles"
        fi
    done
fi
exec "$@"
