//! The templates table: named sandbox recipes, keyed by name.

use crate::json::{decode, encode_list, encode_map};
use crate::{Store, StoreError, TemplateRecord};

/// A `templates` row as stored: JSON columns still text.
#[derive(sqlx::FromRow)]
struct TemplateRow {
    name: String,
    version: i64,
    image: String,
    description: Option<String>,
    setup: String,
    allowed_hosts: String,
    memory_mb: i64,
    cpu_cores: i64,
    ttl_seconds: i64,
    env: String,
    secrets: String,
    pool_size: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl TryFrom<TemplateRow> for TemplateRecord {
    type Error = StoreError;

    fn try_from(row: TemplateRow) -> Result<Self, StoreError> {
        Ok(TemplateRecord {
            setup: decode("template setup", &row.setup)?,
            allowed_hosts: decode("template allowed hosts", &row.allowed_hosts)?,
            env: decode("template env", &row.env)?,
            secrets: decode("template secrets", &row.secrets)?,
            name: row.name,
            version: row.version,
            image: row.image,
            description: row.description,
            memory_mb: row.memory_mb,
            cpu_cores: row.cpu_cores,
            ttl_seconds: row.ttl_seconds,
            pool_size: row.pool_size,
            created_at_ms: row.created_at_ms,
            updated_at_ms: row.updated_at_ms,
        })
    }
}

impl Store {
    /// Inserts a new template; [`StoreError::Conflict`] if its name is taken.
    pub async fn insert_template(&self, t: &TemplateRecord) -> Result<(), StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO templates (name, version, image, description, setup, allowed_hosts, \
             memory_mb, cpu_cores, ttl_seconds, env, secrets, pool_size, created_at_ms, \
             updated_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(&t.name)
        .bind(t.version)
        .bind(&t.image)
        .bind(&t.description)
        .bind(encode_list(&t.setup))
        .bind(encode_list(&t.allowed_hosts))
        .bind(t.memory_mb)
        .bind(t.cpu_cores)
        .bind(t.ttl_seconds)
        .bind(encode_map(&t.env))
        .bind(t.secrets.to_string())
        .bind(t.pool_size)
        .bind(t.created_at_ms)
        .bind(t.updated_at_ms)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("insert template"))?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Conflict {
                what: "template",
                key: t.name.clone(),
            });
        }
        Ok(())
    }

    /// Replaces the template named `t.name` with `t`, except its creation time, which stays
    /// as first inserted; `false` if there is no such template.
    pub async fn update_template(&self, t: &TemplateRecord) -> Result<bool, StoreError> {
        let updated = sqlx::query(
            "UPDATE templates SET version = $2, image = $3, description = $4, setup = $5, \
             allowed_hosts = $6, memory_mb = $7, cpu_cores = $8, ttl_seconds = $9, env = $10, \
             secrets = $11, pool_size = $12, updated_at_ms = $13 \
             WHERE name = $1",
        )
        .bind(&t.name)
        .bind(t.version)
        .bind(&t.image)
        .bind(&t.description)
        .bind(encode_list(&t.setup))
        .bind(encode_list(&t.allowed_hosts))
        .bind(t.memory_mb)
        .bind(t.cpu_cores)
        .bind(t.ttl_seconds)
        .bind(encode_map(&t.env))
        .bind(t.secrets.to_string())
        .bind(t.pool_size)
        .bind(t.updated_at_ms)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("update template"))?;
        Ok(updated.rows_affected() > 0)
    }

    /// The template with this name.
    pub async fn get_template(&self, name: &str) -> Result<Option<TemplateRecord>, StoreError> {
        let row: Option<TemplateRow> = sqlx::query_as(
            "SELECT name, version, image, description, setup, allowed_hosts, memory_mb, \
             cpu_cores, ttl_seconds, env, secrets, pool_size, created_at_ms, updated_at_ms \
             FROM templates WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("read template"))?;
        row.map(TemplateRecord::try_from).transpose()
    }

    /// Every template, sorted by name.
    pub async fn list_templates(&self) -> Result<Vec<TemplateRecord>, StoreError> {
        let rows: Vec<TemplateRow> = sqlx::query_as(
            "SELECT name, version, image, description, setup, allowed_hosts, memory_mb, \
             cpu_cores, ttl_seconds, env, secrets, pool_size, created_at_ms, updated_at_ms \
             FROM templates ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("list templates"))?;
        rows.into_iter().map(TemplateRecord::try_from).collect()
    }

    /// Deletes the template with this name; `false` if there was none.
    pub async fn delete_template(&self, name: &str) -> Result<bool, StoreError> {
        let deleted = sqlx::query("DELETE FROM templates WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(StoreError::query("delete template"))?;
        Ok(deleted.rows_affected() > 0)
    }
}
