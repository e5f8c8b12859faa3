import SIWALoadTest

/// `siwa-loadtest`: the load generator, a product of its own so that `siwa` links nothing it does not serve
/// with. Everything is SIWALoadTest's (``LoadTestCommand``); this file imports nothing else
/// (SIWASiteTests.ExecutableImportsTests).
@main
enum LoadTestMain {
    static func main() async {
        await LoadTestCommand.main()
    }
}
