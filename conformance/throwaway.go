package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The governed probes run in a throwaway project: a child project
// (create_project) carved out of the parent project's remaining budget,
// named conformance-<timestamp>, and deleted (delete_project) when the
// suite ends, whatever its outcome, even when the run was interrupted.
// Deleting it tears down the probe's service, cancels the budget raise
// still waiting for a human and gives the unspent budget back to the
// parent, so the run leaves nothing behind but the organisation's money
// history.

// DefaultThrowawayBudgetUSD is what a run carves out of the parent for
// its throwaway project, less when the parent has less left.
const DefaultThrowawayBudgetUSD = 25

// throwaway is the project the governed probes run in.
type throwaway struct {
	id, name, parent string
	// err is why it could not be made, so that every probe names it.
	err error
}

// needProject makes the throwaway project once; every governed probe
// that quotes or launches runs in it.
func (r *runner) needProject(ctx context.Context, p *probeRun) error {
	if r.project != "" {
		return nil
	}
	if r.throwaway.err != nil {
		return fmt.Errorf("no throwaway project: %w", r.throwaway.err)
	}
	parent, left, err := r.parentProject(ctx, p)
	if err == nil {
		err = r.createThrowaway(ctx, p, parent, left)
	}
	r.throwaway.err = err
	return err
}

// parentProject is --project, or the key's first project, and what it
// has left.
func (r *runner) parentProject(ctx context.Context, p *probeRun) (string, float64, error) {
	var env struct {
		Data struct {
			ID           string  `json:"id"`
			RemainingUsd float64 `json:"remainingUsd"`
			Projects     []struct {
				ID           string  `json:"id"`
				RemainingUsd float64 `json:"remainingUsd"`
			} `json:"projects"`
		} `json:"data"`
	}
	path := "/v1/projects"
	if r.o.ProjectID != "" {
		path += "/" + r.o.ProjectID
	}
	x, err := r.do(ctx, p, "GET", path, r.authed(""), nil)
	if err != nil {
		return "", 0, err
	}
	if x.status != 200 {
		return "", 0, fmt.Errorf("%s answered %d: %.200s", path, x.status, x.body)
	}
	_ = json.Unmarshal(x.body, &env)
	if r.o.ProjectID != "" {
		return env.Data.ID, env.Data.RemainingUsd, nil
	}
	if len(env.Data.Projects) == 0 {
		return "", 0, fmt.Errorf("the key sees no project to carve a throwaway project from")
	}
	return env.Data.Projects[0].ID, env.Data.Projects[0].RemainingUsd, nil
}

// createThrowaway makes the child project and says so.
func (r *runner) createThrowaway(ctx context.Context, p *probeRun, parent string, left float64) error {
	budget := r.o.ThrowawayBudgetUSD
	if budget <= 0 {
		budget = DefaultThrowawayBudgetUSD
	}
	budget = min(budget, left)
	name := "conformance-" + r.o.Now().UTC().Format("20060102T150405Z")
	body, _ := json.Marshal(map[string]any{"name": name, "parentProjectId": parent, "budgetUsd": budget})
	x, err := r.do(ctx, p, "POST", "/v1/projects", r.authed(newKey("project")), body)
	if err != nil {
		return err
	}
	if err := success(x, 201); err != nil {
		return fmt.Errorf("create_project: %w", err)
	}
	var env struct {
		Data struct {
			Project struct {
				ID string `json:"id"`
			} `json:"project"`
		} `json:"data"`
	}
	_ = json.Unmarshal(x.body, &env)
	if env.Data.Project.ID == "" {
		return fmt.Errorf("create_project named no project: %.200s", x.body)
	}
	r.project, r.throwaway = env.Data.Project.ID, throwaway{id: env.Data.Project.ID, name: name, parent: parent}
	r.say("created throwaway project %s (%s), %.2f USD carved from project %s; the governed probes run in it", name, r.project, budget, parent)
	return nil
}

// removeThrowaway deletes the throwaway project, waiting for the
// teardowns it starts, and says what it did; when it cannot, it says
// what is left and the command that removes it. It runs on a context of
// its own, so an interrupted run still cleans up.
func (r *runner) removeThrowaway(ctx context.Context) {
	tw := r.throwaway
	if tw.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	returned, err := r.deleteProject(ctx, tw.id)
	if err == nil {
		r.say("removed throwaway project %s (%s); %.2f USD went back to project %s", tw.name, tw.id, returned, tw.parent)
		return
	}
	lines := []string{fmt.Sprintf("could not remove throwaway project %s (%s): %v", tw.name, tw.id, err)}
	if len(r.leftBehind) > 0 {
		lines = append(lines, "it still holds:")
		for _, l := range r.leftBehind {
			lines = append(lines, "  - "+l)
		}
	}
	lines = append(lines, "remove it with: pier projects delete "+tw.id)
	r.say("%s", strings.Join(lines, "\n"))
}

// deleteProject calls delete_project until the project is deleted,
// polling the teardown tasks it waits for in between, and returns what
// went back to the parent.
func (r *runner) deleteProject(ctx context.Context, id string) (float64, error) {
	p := &probeRun{}
	key := newKey("delete")
	for range 10 {
		x, err := r.do(ctx, p, "DELETE", "/v1/projects/"+id, r.authed(key), nil)
		if err != nil {
			return 0, err
		}
		if x.status != 200 {
			return 0, fmt.Errorf("delete_project answered %d: %.300s", x.status, x.body)
		}
		var env struct {
			Data struct {
				State           string   `json:"state"`
				ReturnedUsd     float64  `json:"returnedUsd"`
				TeardownTaskIds []string `json:"teardownTaskIds"`
			} `json:"data"`
		}
		_ = json.Unmarshal(x.body, &env)
		if env.Data.State == "deleted" {
			return env.Data.ReturnedUsd, nil
		}
		for _, t := range env.Data.TeardownTaskIds {
			if _, err := r.waitTask(ctx, p, t, "succeeded"); err != nil {
				return 0, fmt.Errorf("teardown %s: %w", t, err)
			}
		}
		// The next call is a new request: the first one's answer is
		// kept under its key.
		key = newKey("delete")
	}
	return 0, fmt.Errorf("project %s is still being deleted", id)
}

// say tells the caller about the throwaway project.
func (r *runner) say(format string, args ...any) {
	if r.o.Say != nil {
		r.o.Say(fmt.Sprintf(format, args...))
	}
}
