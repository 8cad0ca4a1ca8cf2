// Package web serves the human pages: sign-in with one-time links, the
// organisation's dashboard, approvals, keys, the signup review and the card
// page. Pages are server-rendered from embedded templates, need a signed-in
// human session of the organisation they belong to, and check a form token
// on every POST. They never accept an agent's credentials, and they are the
// only place an error may carry a resolution. Decisions go through the
// service layer; nothing here writes to the store itself.
package web
