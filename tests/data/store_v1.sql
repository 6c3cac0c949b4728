-- An abductune store written by schema version 1 (for the migration test).
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contexts (
    id INTEGER PRIMARY KEY,
    kernel TEXT NOT NULL, source_hash TEXT NOT NULL, space_fingerprint TEXT NOT NULL,
    problem_key TEXT NOT NULL, hardware TEXT NOT NULL, toolchain TEXT NOT NULL,
    kernel_class TEXT NOT NULL DEFAULT '', dims TEXT NOT NULL DEFAULT '{}',
    dtypes TEXT NOT NULL DEFAULT '{}', shape_bucket TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    UNIQUE (kernel, source_hash, space_fingerprint, problem_key, hardware, toolchain));
CREATE INDEX IF NOT EXISTS contexts_bucket
    ON contexts (source_hash, space_fingerprint, shape_bucket, hardware, toolchain);
CREATE TABLE IF NOT EXISTS measurements (
    context_id INTEGER NOT NULL REFERENCES contexts (id),
    config_key TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL,
    time_ms REAL, objective REAL, samples TEXT NOT NULL DEFAULT '[]',
    compile_s REAL NOT NULL DEFAULT 0, bench_s REAL NOT NULL DEFAULT 0,
    registers INTEGER, spills INTEGER, smem_bytes INTEGER,
    error TEXT NOT NULL DEFAULT '', extra TEXT NOT NULL DEFAULT '{}',
    run_id INTEGER, created REAL NOT NULL,
    PRIMARY KEY (context_id, config_key));
CREATE INDEX IF NOT EXISTS measurements_best ON measurements (context_id, objective);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id INTEGER NOT NULL REFERENCES contexts (id),
    strategy TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted')),
    started REAL NOT NULL, finished REAL,
    options TEXT NOT NULL DEFAULT '{}', heuristics TEXT NOT NULL DEFAULT '[]',
    pid INTEGER, host TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS runs_context ON runs (context_id, status);
CREATE TABLE IF NOT EXISTS theories (
    id TEXT PRIMARY KEY, kernel_class TEXT NOT NULL, regime TEXT NOT NULL DEFAULT '{}',
    dtype_family TEXT NOT NULL DEFAULT '', hardware_family TEXT NOT NULL DEFAULT '',
    rule TEXT NOT NULL DEFAULT '{}', support INTEGER NOT NULL DEFAULT 0,
    refute INTEGER NOT NULL DEFAULT 0, provenance TEXT NOT NULL DEFAULT '{}',
    extra TEXT NOT NULL DEFAULT '{}', updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS theories_class ON theories (kernel_class, hardware_family);
CREATE VIEW IF NOT EXISTS measurement_rows AS
    SELECT c.kernel, c.source_hash, c.space_fingerprint, c.problem_key, c.dims, c.dtypes,
           c.kernel_class, c.shape_bucket, c.hardware, c.toolchain, m.*
    FROM measurements m JOIN contexts c ON c.id = m.context_id;
CREATE VIEW IF NOT EXISTS best_configs AS
    SELECT c.kernel, c.source_hash, c.space_fingerprint, c.problem_key, c.dims, c.dtypes,
           c.kernel_class, c.shape_bucket, c.hardware, c.toolchain, b.*
    FROM (SELECT m.*,
                 ROW_NUMBER() OVER (PARTITION BY m.context_id
                                    ORDER BY m.objective IS NULL, m.objective,
                                             m.created DESC) AS rnk,
                 COUNT(*) OVER (PARTITION BY m.context_id) AS measured
          FROM measurements m) b
    JOIN contexts c ON c.id = b.context_id
    WHERE b.rnk = 1 AND b.objective IS NOT NULL;;

INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO meta VALUES ('created', '1700000000.0');
INSERT INTO contexts (id, kernel, source_hash, space_fingerprint, problem_key, hardware, toolchain, kernel_class, dims, dtypes, shape_bucket, created)
  VALUES (1, 'matmul_fp16', 'abc', 'fp1', 'pk1', 'H100-SXM', 'torch=2.4;triton=3.4', 'matmul', '{"K":4096,"M":16,"N":4096}', '{"a":"fp16","b":"fp16"}', 'K=4096,M=16,N=4096', 1700000000.0);
INSERT INTO measurements VALUES (1, 'k1', '{"BLOCK_M":16,"BLOCK_N":64}', 'ok', 0.05, 0.05, '[0.049,0.05,0.051]', 1.5, 0.2, 96, 0, 32768, '', '{"tflops":10.5}', 1, 1700000001.0);
INSERT INTO measurements VALUES (1, 'k2', '{"BLOCK_M":16,"BLOCK_N":128}', 'ok', 0.04, 0.04, '[0.04]', 1.7, 0.2, 128, 0, 65536, '', '{}', 1, 1700000002.0);
INSERT INTO measurements VALUES (1, 'k3', '{"BLOCK_M":64,"BLOCK_N":128}', 'compile_error', NULL, NULL, '[]', 3.0, 0, NULL, NULL, NULL, 'out of resources', '{}', 1, 1700000003.0);
INSERT INTO runs (id, context_id, strategy, status, started, finished, options, heuristics, pid, host) VALUES (1, 1, 'pattern', 'done', 1700000000.5, 1700000004.0, '{"budget":[3,null]}', '[]', 123, 'gpu-box');
INSERT INTO theories VALUES ('t1', 'matmul', '{"M":[1,64]}', 'fp16', 'hopper', '{"tile:M":16}', 3, 0, '{}', '{}', 1700000005.0);
