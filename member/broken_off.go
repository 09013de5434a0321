//go:build !member_broken

package member

// brokenKeepWork is false in every real build. The member_broken build tag
// sets it to show that the property tests catch a member that keeps its
// work (and so its old assignment) after losing or leaving a generation.
const brokenKeepWork = false
