package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// list is one of the domain's paged lists, as a door reads it.
type list[T any] func(ctx context.Context, orgID string, f store.Filter) (*service.Page[T], error)

// wirePage is a page of a list mapped to the contract, with its next
// steps: a read of the first item (get, with its id) when there is one,
// then the next page.
type wirePage[W any] struct {
	Items      []W
	NextCursor *string
	Actions    []models.Action
	// Args are the list's filters, which the next page's call repeats.
	Args map[string]any
}

// listed reads one page of a list for the caller's organisation: the
// request's cursor and limit, then what filter adds, mapped item by item
// with wire. op is the list's operation, get the one that reads an item
// ("" for none: the caller then builds its own next steps from Args).
func listed[T, W any](ctx context.Context, cursor *string, limit *int, filter func(*store.Filter), read list[T], wire func(T) W, id func(T) string, op, get string) (wirePage[W], error) {
	f, err := page(cursor, limit)
	if err != nil {
		return wirePage[W]{}, err
	}
	if filter != nil {
		filter(&f)
	}
	l, err := read(ctx, auth.FromContext(ctx).OrgID, f)
	if err != nil {
		return wirePage[W]{}, err
	}
	out := wirePage[W]{Items: make([]W, 0, len(l.Items)), NextCursor: l.NextCursor, Args: l.Args}
	for _, v := range l.Items {
		out.Items = append(out.Items, wire(v))
	}
	var first []models.Action
	if len(l.Items) > 0 && get != "" {
		first = append(first, actions.Tool(get, "agent", map[string]any{"id": id(l.Items[0])}))
	}
	out.Actions = actions.Page(op, l.NextCursor, l.Args, first...)
	return out, nil
}

// byProjectAndState narrows a list to a project and a state, each when
// given.
func byProjectAndState[S ~string](projectID *string, state *S) func(*store.Filter) {
	return func(f *store.Filter) { f.ProjectID, f.State = deref(projectID), string(deref(state)) }
}
