// Command hello is what TestBuildsRemovedAtExit builds: any small command.
package main

import "fmt"

func main() { fmt.Println("hello") }
