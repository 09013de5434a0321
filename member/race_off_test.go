//go:build !race

package member_test

const raceEnabled = false
