-- Child projects: a project an agent creates carves its budget out of a
-- parent project's remaining budget and gives back what it did not spend
-- when it is deleted. A deleted project leaves list_projects, but its row
-- stays: receipts, tasks and ledger entries keep naming it, and money
-- history is never deleted.
ALTER TABLE projects ADD COLUMN parent_id TEXT REFERENCES projects(id);
ALTER TABLE projects ADD COLUMN deleted_at BIGINT;
-- deletion is the delete_project answer (JSON, owned by the service
-- layer), which a second delete replays.
ALTER TABLE projects ADD COLUMN deletion TEXT;
CREATE INDEX projects_parent ON projects (parent_id);
