//go:build member_broken

package member

// brokenKeepWork: a deliberately broken member that never cancels its work
// context, for the property tests only (go test -tags member_broken).
const brokenKeepWork = true
