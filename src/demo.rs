pub async fn run() -> anyhow::Result<()> {
    Ok(())
}
