#!/bin/sh
# Airflow needs a home, a metadata database and a DAG folder. The database was
# migrated once, when the dependency image was made (`airflow db migrate` in
# the harness's setup); every run gets its own copy in /tmp, a tmpfs that is
# fresh for every run, so no run sees an earlier run's task instances and none
# pays for the migration. The DAG folder is the repository's `dags/` or
# `airflow/dags/` unless the job sets AIRFLOW__CORE__DAGS_FOLDER.
set -eu
home="${AIRFLOW_HOME:-/tmp/airflow}"
baked=/opt/patchheal/airflow/airflow.db
mkdir -p "$home"
# The copy goes where Airflow will look: the SQLite file of the connection in
# force (a job may move AIRFLOW_HOME or the connection); none for another database.
conn="${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-sqlite:///$home/airflow.db}"
case "$conn" in
    sqlite:////*) db="/${conn#sqlite:////}" ;;
    *) db="" ;;
esac
if [ -n "$db" ] && [ -f "$baked" ] && [ ! -e "$db" ]; then
    mkdir -p "$(dirname "$db")"
    cp "$baked" "$db"
fi
if [ -z "${AIRFLOW__CORE__DAGS_FOLDER:-}" ]; then
    for folder in dags airflow/dags; do
        if [ -d "$folder" ]; then
            AIRFLOW__CORE__DAGS_FOLDER="$PWD/$folder"
            export AIRFLOW__CORE__DAGS_FOLDER
            break
        fi
    done
fi
exec "$@"
