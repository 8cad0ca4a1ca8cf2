package cmdutil

import (
	"testing"

	"github.com/pierhq/pier/sdk"
)

func TestFailedTaskExitsWithItsCause(t *testing.T) {
	for code, want := range map[string]int{"plan:domain_unavailable": ExitBlocked, "conflict:quote_mismatch": ExitConflict, "provider:failed": ExitServer, "service:unhealthy": ExitServiceFailed, "plan:no_command": ExitBlocked} {
		res := map[string]any{"blockedBy": code}
		err := &sdk.TaskFailedError{Task: &sdk.TaskHandle{TaskId: "tsk_1", State: "failed", Result: &res}}
		if got := ExitCode(err); got != want {
			t.Errorf("%s: exit %d, want %d", code, got, want)
		}
	}
}

func TestInputRequiredAnswerExitsFive(t *testing.T) {
	err := WaitingForHuman([]byte(`{"data":{"taskId":"tsk_1","state":"input_required","approvalUrl":"http://x/approvals/gat_1"}}`))
	if ExitCode(err) != ExitInputRequired {
		t.Fatalf("exit %d", ExitCode(err))
	}
	if WaitingForHuman([]byte(`{"data":{"taskId":"tsk_1","state":"running"}}`)) != nil {
		t.Fatal("a running task is not input required")
	}
}
