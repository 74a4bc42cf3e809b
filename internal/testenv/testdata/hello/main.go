// Command hello prints hello: a program for the tests of testenv.Program.
package main

import "fmt"

func main() { fmt.Println("hello") }
